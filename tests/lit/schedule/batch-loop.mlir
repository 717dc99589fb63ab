// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=2 strict=true}' | FileCheck %s
// RUN: relaxmlir-opt %s '--relax-schedule-cpu{target="llvm -mcpu=x86-64-v4" threads=1 strict=true}' | FileCheck %s --check-prefix=ONE

// A padded conv + bias + ReLU over a symbolic batch (NCHW16c, as AlterOpLayout leaves a ResNet
// block built for any batch): the samples are independent, so the kernel is a loop over the
// batch around the static kernel of one sample, which gets the static schedules (the padded
// copy, the conv's register tiles with its epilogue), computed on each sample's slice of the
// input and the out-argument. From 2 samples (the threads) on, the samples split across the
// threads, each running a single-threaded copy of the kernel; below, a serial loop runs a copy
// whose columns split across the threads.
// CHECK-LABEL: func.func private @conv_bias_relu
// CHECK-SAME: relax.schedule = ["per-sample", "elementwise-16", "conv-2x7x16+epilogue"
// CHECK: %[[N:.+]] = tensor.dim %arg3, %c0 : tensor<?x2x14x14x16xf32>
// CHECK: %[[MANY:.+]] = arith.cmpi sge, %[[N]], %c2 : index
// CHECK: scf.if %[[MANY]] -> (tensor<?x2x14x14x16xf32>)
// CHECK: scf.forall (%[[B:.+]]) in (%[[N]]) shared_outs(%[[ACC:.+]] = %arg3)
// CHECK: tensor.extract_slice %arg0[%[[B]], 0, 0, 0, 0] [1, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<?x2x14x14x16xf32> to tensor<1x2x14x14x16xf32>
// CHECK-NOT: scf.forall (
// CHECK: math.fma %{{.+}} : vector<2x7x16xf32>
// CHECK: tensor.parallel_insert_slice %{{.+}} into %[[ACC]][%[[B]], 0, 0, 0, 0] [1, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<1x2x14x14x16xf32> into tensor<?x2x14x14x16xf32>
// CHECK: } else {
// CHECK: scf.for %[[B2:.+]] = %{{.+}} to %[[N]] step %{{.+}} iter_args(%[[ACC2:.+]] = %arg3)
// CHECK: tensor.extract_slice %arg0[%[[B2]], 0, 0, 0, 0] [1, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<?x2x14x14x16xf32> to tensor<1x2x14x14x16xf32>
// CHECK-NOT: tensor<?x
// CHECK: scf.forall (%{{.+}}) in (2) shared_outs(%{{.+}} = %{{.+}}) -> (tensor<1x2x14x14x16xf32>)
// CHECK: math.fma %{{.+}} : vector<2x7x16xf32>
// CHECK: %[[SAMPLE:.+]] = tensor.insert_slice %{{.+}} into %[[ACC2]][%[[B2]], 0, 0, 0, 0] [1, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<1x2x14x14x16xf32> into tensor<?x2x14x14x16xf32>
// CHECK-NEXT: scf.yield %[[SAMPLE]]

// One thread: a serial loop over the samples, nothing parallel.
// ONE-LABEL: func.func private @conv_bias_relu
// ONE-SAME: relax.schedule = ["per-sample", "elementwise-16", "conv-2x7x16+epilogue"
// ONE-NOT: scf.if
// ONE-NOT: scf.forall
// ONE: scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
// ONE-NOT: scf.forall
// ONE: return
#img = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d5, d2 + d6, d3 + d7, d8)>
#wgt = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d1, d5, d6, d7, d8, d4)>
#out = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d1, d2, d3, d4)>
#id = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#bias = affine_map<(d0, d1, d2, d3, d4) -> (0, d1, 0, 0, d4)>
#first = affine_map<(d0, d1, d2, d3, d4) -> (0, d1, d2, d3, d4)>
#conv_iters = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]
func.func private @conv_bias_relu(%x: tensor<?x2x14x14x16xf32>, %w: tensor<2x2x3x3x16x16xf32>, %b: tensor<1x2x1x1x16xf32>, %out: tensor<?x2x14x14x16xf32>) -> tensor<?x2x14x14x16xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %n = tensor.dim %out, %c0 : tensor<?x2x14x14x16xf32>
  %acc0 = tensor.empty(%n) : tensor<?x2x14x14x16xf32>
  %n1 = tensor.dim %x, %c0 : tensor<?x2x14x14x16xf32>
  %pe = tensor.empty(%n1) : tensor<?x2x16x16x16xf32>
  %pf = linalg.fill ins(%cst : f32) outs(%pe : tensor<?x2x16x16x16xf32>) -> tensor<?x2x16x16x16xf32>
  %inner = tensor.extract_slice %pf[0, 0, 1, 1, 0] [%n1, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<?x2x16x16x16xf32> to tensor<?x2x14x14x16xf32>
  %copied = linalg.copy ins(%x : tensor<?x2x14x14x16xf32>) outs(%inner : tensor<?x2x14x14x16xf32>) -> tensor<?x2x14x14x16xf32>
  %padded = tensor.insert_slice %copied into %pf[0, 0, 1, 1, 0] [%n1, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<?x2x14x14x16xf32> into tensor<?x2x16x16x16xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%acc0 : tensor<?x2x14x14x16xf32>) -> tensor<?x2x14x14x16xf32>
  %conv = linalg.generic {indexing_maps = [#img, #wgt, #out], iterator_types = #conv_iters} ins(%padded, %w : tensor<?x2x16x16x16xf32>, tensor<2x2x3x3x16x16xf32>) outs(%zero : tensor<?x2x14x14x16xf32>) {
  ^bb0(%in: f32, %k: f32, %o: f32):
    %m = arith.mulf %in, %k : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<?x2x14x14x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%conv, %b : tensor<?x2x14x14x16xf32>, tensor<1x2x1x1x16xf32>) outs(%acc0 : tensor<?x2x14x14x16xf32>) {
  ^bb0(%in: f32, %bb: f32, %o: f32):
    %a = arith.addf %in, %bb : f32
    %r = arith.maximumf %a, %cst : f32
    linalg.yield %r : f32
  } -> tensor<?x2x14x14x16xf32>
  return %y : tensor<?x2x14x14x16xf32>
}

// A static batch of 4 on 2 threads: the samples always fill the threads, one parallel loop.
// CHECK-LABEL: func.func private @conv_batch4
// CHECK-NOT: scf.if
// CHECK: scf.forall (%[[B:.+]]) in (4) shared_outs(%[[ACC:.+]] = %arg3) -> (tensor<4x2x14x14x16xf32>)
// CHECK-NOT: scf.forall (
// CHECK: tensor.parallel_insert_slice %{{.+}} into %[[ACC]][%[[B]], 0, 0, 0, 0] [1, 2, 14, 14, 16]
func.func private @conv_batch4(%x: tensor<4x2x14x14x16xf32>, %w: tensor<2x2x3x3x16x16xf32>, %b: tensor<1x2x1x1x16xf32>, %out: tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %acc0 = tensor.empty() : tensor<4x2x14x14x16xf32>
  %pe = tensor.empty() : tensor<4x2x16x16x16xf32>
  %pf = linalg.fill ins(%cst : f32) outs(%pe : tensor<4x2x16x16x16xf32>) -> tensor<4x2x16x16x16xf32>
  %inner = tensor.extract_slice %pf[0, 0, 1, 1, 0] [4, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<4x2x16x16x16xf32> to tensor<4x2x14x14x16xf32>
  %copied = linalg.copy ins(%x : tensor<4x2x14x14x16xf32>) outs(%inner : tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32>
  %padded = tensor.insert_slice %copied into %pf[0, 0, 1, 1, 0] [4, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<4x2x14x14x16xf32> into tensor<4x2x16x16x16xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%acc0 : tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32>
  %conv = linalg.generic {indexing_maps = [#img, #wgt, #out], iterator_types = #conv_iters} ins(%padded, %w : tensor<4x2x16x16x16xf32>, tensor<2x2x3x3x16x16xf32>) outs(%zero : tensor<4x2x14x14x16xf32>) {
  ^bb0(%in: f32, %k: f32, %o: f32):
    %m = arith.mulf %in, %k : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<4x2x14x14x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%conv, %b : tensor<4x2x14x14x16xf32>, tensor<1x2x1x1x16xf32>) outs(%acc0 : tensor<4x2x14x14x16xf32>) {
  ^bb0(%in: f32, %bb: f32, %o: f32):
    %a = arith.addf %in, %bb : f32
    %r = arith.maximumf %a, %cst : f32
    linalg.yield %r : f32
  } -> tensor<4x2x14x14x16xf32>
  return %y : tensor<4x2x14x14x16xf32>
}

// A static batch of 3 on 2 threads: a serial loop over the samples, each split across threads.
// CHECK-LABEL: func.func private @conv_batch3
// CHECK-NOT: scf.if
// CHECK: scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %arg3) -> (tensor<3x2x14x14x16xf32>)
// CHECK: scf.forall (%{{.+}}) in (2)
// CHECK: tensor.insert_slice %{{.+}} into %[[ACC]][%[[B]], 0, 0, 0, 0] [1, 2, 14, 14, 16]
func.func private @conv_batch3(%x: tensor<3x2x14x14x16xf32>, %w: tensor<2x2x3x3x16x16xf32>, %b: tensor<1x2x1x1x16xf32>, %out: tensor<3x2x14x14x16xf32>) -> tensor<3x2x14x14x16xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %acc0 = tensor.empty() : tensor<3x2x14x14x16xf32>
  %pe = tensor.empty() : tensor<3x2x16x16x16xf32>
  %pf = linalg.fill ins(%cst : f32) outs(%pe : tensor<3x2x16x16x16xf32>) -> tensor<3x2x16x16x16xf32>
  %inner = tensor.extract_slice %pf[0, 0, 1, 1, 0] [3, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<3x2x16x16x16xf32> to tensor<3x2x14x14x16xf32>
  %copied = linalg.copy ins(%x : tensor<3x2x14x14x16xf32>) outs(%inner : tensor<3x2x14x14x16xf32>) -> tensor<3x2x14x14x16xf32>
  %padded = tensor.insert_slice %copied into %pf[0, 0, 1, 1, 0] [3, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<3x2x14x14x16xf32> into tensor<3x2x16x16x16xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%acc0 : tensor<3x2x14x14x16xf32>) -> tensor<3x2x14x14x16xf32>
  %conv = linalg.generic {indexing_maps = [#img, #wgt, #out], iterator_types = #conv_iters} ins(%padded, %w : tensor<3x2x16x16x16xf32>, tensor<2x2x3x3x16x16xf32>) outs(%zero : tensor<3x2x14x14x16xf32>) {
  ^bb0(%in: f32, %k: f32, %o: f32):
    %m = arith.mulf %in, %k : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<3x2x14x14x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%conv, %b : tensor<3x2x14x14x16xf32>, tensor<1x2x1x1x16xf32>) outs(%acc0 : tensor<3x2x14x14x16xf32>) {
  ^bb0(%in: f32, %bb: f32, %o: f32):
    %a = arith.addf %in, %bb : f32
    %r = arith.maximumf %a, %cst : f32
    linalg.yield %r : f32
  } -> tensor<3x2x14x14x16xf32>
  return %y : tensor<3x2x14x14x16xf32>
}

// The same conv whose epilogue adds the FIRST sample's input to every sample: the samples are
// not independent, so the batch stays symbolic (no loop over samples).
// CHECK-LABEL: func.func private @conv_plus_first_sample
// CHECK-NOT: tensor<1x2x14x14x16xf32>
// CHECK: return
func.func private @conv_plus_first_sample(%x: tensor<?x2x14x14x16xf32>, %w: tensor<2x2x1x1x16x16xf32>, %out: tensor<?x2x14x14x16xf32>) -> tensor<?x2x14x14x16xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %zero = linalg.fill ins(%cst : f32) outs(%out : tensor<?x2x14x14x16xf32>) -> tensor<?x2x14x14x16xf32>
  %conv = linalg.generic {indexing_maps = [#img, #wgt, #out], iterator_types = #conv_iters} ins(%x, %w : tensor<?x2x14x14x16xf32>, tensor<2x2x1x1x16x16xf32>) outs(%zero : tensor<?x2x14x14x16xf32>) {
  ^bb0(%in: f32, %k: f32, %o: f32):
    %m = arith.mulf %in, %k : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<?x2x14x14x16xf32>
  %y = linalg.generic {indexing_maps = [#id, #first, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%conv, %x : tensor<?x2x14x14x16xf32>, tensor<?x2x14x14x16xf32>) outs(%out : tensor<?x2x14x14x16xf32>) {
  ^bb0(%in: f32, %first: f32, %o: f32):
    %a = arith.addf %in, %first : f32
    linalg.yield %a : f32
  } -> tensor<?x2x14x14x16xf32>
  return %y : tensor<?x2x14x14x16xf32>
}

// A linear layer over a symbolic batch has one row per sample: it keeps the symbolic schedule
// (8-row tiles over the whole batch, then the remainder; a serial and a parallel copy), which
// reuses each weight panel.
// CHECK-LABEL: func.func private @linear
// CHECK-SAME: relax.schedule = ["matmul-rows-8x32+4x32+2x32+1x32", "matmul-rows-8x32+4x32+2x32+1x32"]
// CHECK-NOT: tensor<1x64xf32>
// CHECK: return
func.func private @linear(%x: tensor<?x64xf32>, %w: tensor<64x32xf32>, %out: tensor<?x32xf32>) -> tensor<?x32xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %zero = linalg.fill ins(%cst : f32) outs(%out : tensor<?x32xf32>) -> tensor<?x32xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : tensor<?x64xf32>, tensor<64x32xf32>) outs(%zero : tensor<?x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// The same static batch of 4 as `fuse_tir.make_inplace` leaves it (ResNet-18 built for batch 8):
// bias + ReLU update the conv's result in place. The sample kernel reads it as an input again,
// so the conv is computed tile by tile through its epilogue, as at batch 1.
// CHECK-LABEL: func.func private @conv_batch4_in_place
// CHECK-SAME: relax.schedule = ["per-sample", "elementwise-16", "conv-2x7x16+epilogue"
// CHECK: scf.forall (%[[B:.+]]) in (4) shared_outs(%[[ACC:.+]] = %arg3) -> (tensor<4x2x14x14x16xf32>)
// CHECK: math.fma %{{.+}} : vector<2x7x16xf32>
// CHECK: arith.maximumf %{{.+}} : vector<2x7x16xf32>
// CHECK: tensor.parallel_insert_slice %{{.+}} into %[[ACC]][%[[B]], 0, 0, 0, 0] [1, 2, 14, 14, 16]
func.func private @conv_batch4_in_place(%x: tensor<4x2x14x14x16xf32>, %w: tensor<2x2x3x3x16x16xf32>, %b: tensor<1x2x1x1x16xf32>, %out: tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32> attributes {relax.prim_func} {
  %cst = arith.constant 0.000000e+00 : f32
  %acc0 = tensor.empty() : tensor<4x2x14x14x16xf32>
  %pe = tensor.empty() : tensor<4x2x16x16x16xf32>
  %pf = linalg.fill ins(%cst : f32) outs(%pe : tensor<4x2x16x16x16xf32>) -> tensor<4x2x16x16x16xf32>
  %inner = tensor.extract_slice %pf[0, 0, 1, 1, 0] [4, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<4x2x16x16x16xf32> to tensor<4x2x14x14x16xf32>
  %copied = linalg.copy ins(%x : tensor<4x2x14x14x16xf32>) outs(%inner : tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32>
  %padded = tensor.insert_slice %copied into %pf[0, 0, 1, 1, 0] [4, 2, 14, 14, 16] [1, 1, 1, 1, 1] : tensor<4x2x14x14x16xf32> into tensor<4x2x16x16x16xf32>
  %zero = linalg.fill ins(%cst : f32) outs(%acc0 : tensor<4x2x14x14x16xf32>) -> tensor<4x2x14x14x16xf32>
  %conv = linalg.generic {indexing_maps = [#img, #wgt, #out], iterator_types = #conv_iters} ins(%padded, %w : tensor<4x2x16x16x16xf32>, tensor<2x2x3x3x16x16xf32>) outs(%zero : tensor<4x2x14x14x16xf32>) {
  ^bb0(%in: f32, %k: f32, %o: f32):
    %m = arith.mulf %in, %k : f32
    %a = arith.addf %o, %m : f32
    linalg.yield %a : f32
  } -> tensor<4x2x14x14x16xf32>
  %y = linalg.generic {indexing_maps = [#bias, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%b : tensor<1x2x1x1x16xf32>) outs(%conv : tensor<4x2x14x14x16xf32>) {
  ^bb0(%bb: f32, %o: f32):
    %a = arith.addf %o, %bb : f32
    %r = arith.maximumf %a, %cst : f32
    linalg.yield %r : f32
  } -> tensor<4x2x14x14x16xf32>
  return %y : tensor<4x2x14x14x16xf32>
}
