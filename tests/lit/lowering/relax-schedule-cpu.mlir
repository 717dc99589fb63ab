// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1}' | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{schedule=off}' | FileCheck %s --check-prefix=OFF
// RUN: not relaxmlir-opt %s --relax-schedule-cpu=schedule=maybe 2>&1 | FileCheck %s --check-prefix=BAD

// An elementwise PrimFunc is tiled and vectorized on tensors, and records the rule that ran.
// Its loops, whose every step is a whole vector, are marked for LLVM not to unroll.
// CHECK: #[[$UNROLL:.+]] = #llvm.loop_unroll<disable = true>
// CHECK: #[[$ROLLED:.+]] = #llvm.loop_annotation<unroll = #[[$UNROLL]]>
// CHECK-LABEL: func.func private @relu
// CHECK-SAME: relax.schedule = ["elementwise{{.*}}"]
// CHECK: scf.for
// CHECK: vector.transfer_read
// CHECK: arith.maximumf {{.*}} : vector<{{.*}}xf32>
// CHECK: vector.transfer_write
// CHECK: } {loop_annotation = #[[$ROLLED]]}
// CHECK: } {loop_annotation = #[[$ROLLED]]}
// CHECK-NOT: linalg.generic
// CHECK: return

// OFF-LABEL: func.func private @relu
// OFF-NOT: relax.schedule
// OFF: linalg.generic

// BAD: relaxmlir-opt: error: relax-schedule-cpu: expected schedule=on|off, got (maybe)

#map = affine_map<(d0, d1) -> (d0, d1)>
func.func private @relu(%a: tensor<64x128xf32>, %out: tensor<64x128xf32>) -> tensor<64x128xf32> attributes {relax.prim_func} {
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<64x128xf32>) outs(%out : tensor<64x128xf32>) {
  ^bb0(%in: f32, %o: f32):
    %cst = arith.constant 0.000000e+00 : f32
    %1 = arith.maximumf %in, %cst : f32
    linalg.yield %1 : f32
  } -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}
