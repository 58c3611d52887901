// A tensor-core matmul with a fixed k order, for bit-exact comparison with the
// block-FMA model (ampref.tensorcore, specs/backends.md BKD-MM-003).
//
// One warp computes one 16x16 tile of C = A @ B with WMMA m16n16k16 operations,
// chaining k blocks of 16 in ascending order through the float32 accumulator, which
// starts at +0. On Hopper one such operation is one block of the model (block 16,
// 25 fraction bits, round toward zero), so the tile is exactly
// tensorcore.gemm(A, B, 0, gpu="h100"). Operands are row-major, padded by the caller
// to multiples of 16 with zeros (zero products take no part in the model's exponent
// maximum, and the model zero-pads its last block the same way).
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

template <typename T>
__device__ void ampref_mma_chain(const T* A, const T* B, float* C, int M, int N, int K) {
    using namespace nvcuda;
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32);
    const int tiles_n = N / 16;
    const int tm = warp / tiles_n, tn = warp % tiles_n;
    if (tm >= M / 16) return;  // warp-uniform: the whole warp leaves together
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {  // ascending k: the model's chaining order
        wmma::load_matrix_sync(a, A + (size_t)tm * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + (size_t)k * N + (size_t)tn * 16, N);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + (size_t)tm * 16 * N + (size_t)tn * 16, acc, N, wmma::mem_row_major);
}

extern "C" __global__ void ampref_mma_chain_f16(const __half* A, const __half* B, float* C,
                                                int M, int N, int K) {
    ampref_mma_chain<__half>(A, B, C, M, N, K);
}

extern "C" __global__ void ampref_mma_chain_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                                 float* C, int M, int N, int K) {
    ampref_mma_chain<__nv_bfloat16>(A, B, C, M, N, K);
}
