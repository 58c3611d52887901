// CUDA entry points of the CuPy backend. backends/kernelsrc.py prepends
// ampref_kernels.cuh (NVRTC gets one source string); each kernel is a grid-stride loop
// over the element function that the host harness runs in a plain loop.

#define AMPREF_GRID_LOOP(i, n)                                                     \
    for (ampref_i64 i = (ampref_i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (ampref_i64)blockDim.x * gridDim.x)

// float32 in, float32 bits out. Stochastic words: srhash(seed keys, start + i).
extern "C" __global__ void ampref_quantize_f32(const ampref_u32* x, ampref_u32* y, ampref_i64 n,
                                               const int* P, int rnd, int sat, int subnormals,
                                               ampref_u32 k1, ampref_u32 k2, ampref_i64 start) {
    AMPREF_GRID_LOOP(i, n) {
        const ampref_u32 r = ampref_rounding_word(rnd, k1, k2, start + i);
        y[i] = ampref_quantize_bits(ampref_f32_to_f64_bits(x[i]), P, rnd, sat, subnormals, r);
    }
}

// float64 in, float64 bits out (the float32 value widened exactly).
extern "C" __global__ void ampref_quantize_f64(const ampref_u64* x, ampref_u64* y, ampref_i64 n,
                                               const int* P, int rnd, int sat, int subnormals,
                                               ampref_u32 k1, ampref_u32 k2, ampref_i64 start) {
    AMPREF_GRID_LOOP(i, n) {
        const ampref_u32 r = ampref_rounding_word(rnd, k1, k2, start + i);
        y[i] = ampref_f32_to_f64_bits(ampref_quantize_bits(x[i], P, rnd, sat, subnormals, r));
    }
}

// Codes (nearest-even) of float32 values: the fp16/bf16 operands of the matmuls.
extern "C" __global__ void ampref_encode16_f32(const ampref_u32* x, unsigned short* codes,
                                               ampref_i64 n, const int* P) {
    AMPREF_GRID_LOOP(i, n) {
        int is_nan = 0;
        codes[i] = (unsigned short)ampref_encode(ampref_f32_to_f64_bits(x[i]), P,
                                                 AMPREF_RND_NEAREST_EVEN, 0, 1, 0u, &is_nan);
    }
}

extern "C" __global__ void ampref_random_bits_kernel(ampref_u32* out, ampref_i64 n, ampref_u32 k1,
                                                     ampref_u32 k2, ampref_i64 start) {
    AMPREF_GRID_LOOP(i, n) out[i] = ampref_random_bits(k1, k2, (ampref_u64)(start + i));
}

// Unscale one gradient in place and raise the step's found flag in the scaler row. The
// inverse scale comes from the device row, so no value travels to the host per tensor.
extern "C" __global__ void ampref_unscale_f32_kernel(float* g, ampref_i64 n, ampref_i64* st) {
    const float inv = ampref_inverse_scale(st);
    int bad = 0;
    AMPREF_GRID_LOOP(i, n) bad |= ampref_unscale_f32(g + i, inv);
    if (bad) st[AMPREF_ST_FOUND] = 1;  // every writer stores the same value: no atomic needed
}

// One loss-scale update for the step (a single thread: the whole state is a few words).
extern "C" __global__ void ampref_scaler_update_kernel(ampref_i64* st, const double* cfg_d,
                                                       const ampref_i64* cfg_i) {
    if (blockIdx.x == 0 && threadIdx.x == 0) ampref_scaler_update_row(st, cfg_d, cfg_i);
}

// Exact GEMM (BKD-MM-005): C[t, i, j] = fl32(exact sum_k A[t, i, k] B[t, k, j]) for
// C-contiguous (T, M, K) and (T, K, N) float32 values widened to float64; a batch stride
// of 0 broadcasts an operand.
// One thread per output element (ampref_exact_dot_f32, exact_dot.cuh).
extern "C" __global__ void ampref_exact_gemm_f32(const double* A, const double* B, float* C,
                                                 ampref_i64 T, ampref_i64 M, ampref_i64 N,
                                                 ampref_i64 K, ampref_i64 sa, ampref_i64 sb) {
    AMPREF_GRID_LOOP(o, T * M * N) {
        const ampref_i64 j = o % N, i = (o / N) % M, t = o / (M * N);
        C[o] = ampref_exact_dot_f32(A + t * sa + i * K, 1, B + t * sb + j, N, K, 0);
    }
}

// Exact row sums (BKD-RED-001): out[r] = fl32(exact sum of X[r, :]) for C-contiguous
// (R, L) float32 values widened to float64: the dot product with a column of ones
// (stride 0), every product exact.
extern "C" __global__ void ampref_exact_rows_f32(const double* X, float* out, ampref_i64 R,
                                                 ampref_i64 L) {
    const double one = 1.0;
    AMPREF_GRID_LOOP(r, R) out[r] = ampref_exact_dot_f32(X + r * L, 1, &one, 0, L, 0);
}

// Adam/AdamW on one parameter (BKD-OPT-001): new weights, first and second moments in one
// pass; k holds the nine constants in the parameter's dtype (optim.cuh).
extern "C" __global__ void ampref_adam_f32(const float* w, const float* g, const float* m,
                                           const float* v, float* out, float* m_out,
                                           float* v_out, ampref_i64 n, const float* k,
                                           int decoupled, int decay) {
    AMPREF_GRID_LOOP(i, n) ampref_adam_element(w, g, m, v, out, m_out, v_out, i, k, decoupled, decay);
}

extern "C" __global__ void ampref_adam_f64(const double* w, const double* g, const double* m,
                                           const double* v, double* out, double* m_out,
                                           double* v_out, ampref_i64 n, const double* k,
                                           int decoupled, int decay) {
    AMPREF_GRID_LOOP(i, n) ampref_adam_element(w, g, m, v, out, m_out, v_out, i, k, decoupled, decay);
}

// Training statistics (BKD-STA-001): per-thread counts of counts.cuh, then one atomic
// addition per thread into out[0], out[1] (int64 counters the caller zeroed).
extern "C" __global__ void ampref_rounding_counts_f32(const float* raw, const float* rounded,
                                                      ampref_i64 n, unsigned long long* out) {
    ampref_u64 under = 0, over = 0;
    AMPREF_GRID_LOOP(i, n) ampref_rounding_counts(raw[i], rounded[i], &under, &over);
    if (under) atomicAdd(out, under);
    if (over) atomicAdd(out + 1, over);
}

extern "C" __global__ void ampref_grad_counts_f32(const float* g, ampref_i64 n, float scale,
                                                  unsigned long long* out) {
    ampref_u64 nonzero = 0, tiny = 0;
    AMPREF_GRID_LOOP(i, n) ampref_grad_counts(g[i], scale, &nonzero, &tiny);
    if (nonzero) atomicAdd(out, nonzero);
    if (tiny) atomicAdd(out + 1, tiny);
}

// Exact segment sums (BKD-RED-002): out[s, c] = fl32(exact sum of X[r, c]) over the rows
// r of segment s (starts[s] up to the next start, or n), X C-contiguous (n, D) float32
// values widened to float64; an all -0 segment gives -0, as a float64 sum started at
// its first term.
extern "C" __global__ void ampref_exact_segments_f32(const double* X, const ampref_i64* starts,
                                                     ampref_i64 S, ampref_i64 n, ampref_i64 D,
                                                     float* out) {
    const double one = 1.0;
    AMPREF_GRID_LOOP(o, S * D) {
        const ampref_i64 s = o / D, c = o % D;
        const ampref_i64 lo = starts[s], hi = s + 1 < S ? starts[s + 1] : n;
        out[o] = ampref_exact_dot_f32(X + lo * D + c, D, &one, 0, hi - lo, 1);
    }
}
