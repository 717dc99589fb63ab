// RUN: relaxmlir-opt %s '--relax-masked-partial-vectors=target="llvm -mcpu=x86-64-v4"' | FileCheck %s --check-prefix=AVX512
// RUN: relaxmlir-opt %s '--relax-masked-partial-vectors=target="llvm -mcpu=x86-64-v3"' | FileCheck %s --check-prefix=AVX2
// RUN: not relaxmlir-opt %s '--relax-masked-partial-vectors=target="cuda"' 2>&1 | FileCheck %s --check-prefix=KIND

// KIND: error: relax-masked-partial-vectors: expected an llvm target, got (cuda

// A 14-lane row (an NCHW image row of 14 or 28 pixels on AVX-512) is read as one masked
// 16-lane load and its first 14 lanes; written as the row widened to 16 lanes and one masked
// store. On AVX2 (8 lanes) a 14-lane row is wider than a register and stays; a 6-lane one is
// read with an 8-lane mask, and writes stay unmasked (AVX2's masked store is slow on AMD).
// AVX512-LABEL: func.func @rows
// AVX512: %[[M:.+]] = vector.constant_mask [14] : vector<16xi1>
// AVX512: %[[W:.+]] = vector.maskedload %arg0[%arg2, %arg3], %[[M]], %{{.+}} : memref<16x16xf32>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// AVX512: %[[R:.+]] = vector.extract_strided_slice %[[W]] {offsets = [0], sizes = [14], strides = [1]} : vector<16xf32> to vector<14xf32>
// AVX512: %[[S:.+]] = arith.addf %[[R]], %[[R]] : vector<14xf32>
// AVX512: %[[M2:.+]] = vector.constant_mask [14] : vector<16xi1>
// AVX512: %[[O:.+]] = vector.insert_strided_slice %[[S]], %{{.+}} {offsets = [0], strides = [1]} : vector<14xf32> into vector<16xf32>
// AVX512: vector.maskedstore %arg1[%arg2, %arg3], %[[M2]], %[[O]] : memref<16x14xf32, strided<[14, 1]>>, vector<16xi1>, vector<16xf32>
// AVX512: vector.maskedload %arg0{{.+}} into vector<8xf32>
// AVX512: vector.maskedstore %arg1{{.+}} vector<8xi1>, vector<8xf32>
// AVX512-NOT: vector.transfer_read
// AVX512: vector.transfer_read %arg4
// AVX512: vector.transfer_read %arg0{{.+}} : memref<16x16xf32>, vector<16xf32>
// AVX512: return
// AVX2-LABEL: func.func @rows
// AVX2: vector.transfer_read %arg0{{.+}} : memref<16x16xf32>, vector<14xf32>
// AVX2: vector.transfer_write %{{.+}}, %arg1{{.+}} : vector<14xf32>, memref<16x14xf32, strided<[14, 1]>>
// AVX2: %[[M:.+]] = vector.constant_mask [6] : vector<8xi1>
// AVX2: vector.maskedload %arg0[%arg2, %arg3], %[[M]]
// AVX2-NOT: vector.maskedstore
// AVX2: return
func.func @rows(%src: memref<16x16xf32>, %dst: memref<16x14xf32, strided<[14, 1]>>, %i: index, %j: index, %cols: memref<16x16xf32, strided<[1, 16]>>) -> vector<16xf32> {
  %pad = arith.constant 0.0 : f32
  %row = vector.transfer_read %src[%i, %j], %pad {in_bounds = [true]} : memref<16x16xf32>, vector<14xf32>
  %sum = arith.addf %row, %row : vector<14xf32>
  vector.transfer_write %sum, %dst[%i, %j] {in_bounds = [true]} : vector<14xf32>, memref<16x14xf32, strided<[14, 1]>>
  %six = vector.transfer_read %src[%i, %j], %pad {in_bounds = [true]} : memref<16x16xf32>, vector<6xf32>
  vector.transfer_write %six, %dst[%i, %j] {in_bounds = [true]} : vector<6xf32>, memref<16x14xf32, strided<[14, 1]>>
  // a column of a transposed view (not contiguous): left as it is
  %col = vector.transfer_read %cols[%i, %j], %pad {in_bounds = [true]} : memref<16x16xf32, strided<[1, 16]>>, vector<14xf32>
  // a whole register: left as it is
  %full = vector.transfer_read %src[%i, %j], %pad {in_bounds = [true]} : memref<16x16xf32>, vector<16xf32>
  return %full : vector<16xf32>
}
