"""torch.compile with relaxmlir as the backend: each graph TorchDynamo captures is imported,
compiled once (dynamic sizes become symbolic dims), and run on torch tensors.

Run: python examples/torch_compile.py
"""

import torch

from relaxmlir.frontend import dynamo


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(784, 128), torch.nn.Linear(128, 10)

    def forward(self, x):
        return torch.log_softmax(self.fc2(torch.relu(self.fc1(x))), dim=-1)


def main() -> None:
    torch.manual_seed(0)
    model = MLP().eval()
    compiled = torch.compile(model, backend="relaxmlir")  # found through an entry point
    with torch.no_grad():
        for batch in (8, 16, 33):
            x = torch.randn(batch, 784)
            diff = (compiled(x) - model(x)).abs().max().item()
            print(
                f"batch {batch}: max abs difference to eager {diff:.2e}; builds so far {dynamo.STATS['builds']}"
            )


if __name__ == "__main__":
    main()
