"""`topi.nn`: neural-network operators written with `te`."""

from relaxmlir.topi.nn.conv2d import conv2d, mirror_pad, pad  # noqa: F401
from relaxmlir.topi.nn.dense import dense, matmul  # noqa: F401
from relaxmlir.topi.nn.elemwise import gelu, gelu_tanh, leaky_relu, relu, silu  # noqa: F401
from relaxmlir.topi.nn.norm import batch_norm, layer_norm  # noqa: F401
from relaxmlir.topi.nn.pooling import adaptive_pool, pool2d  # noqa: F401
from relaxmlir.topi.nn.softmax import log_softmax, softmax  # noqa: F401
