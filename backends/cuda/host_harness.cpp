// Host build of ampref_kernels.cuh for the tests (no GPU needed): the same element
// functions as kernels.cu, run in plain loops, called from Python through ctypes.
#include "ampref_kernels.cuh"
#include "exact_dot.cuh"
#include "optim.cuh"
#include "counts.cuh"

extern "C" {

void ampref_host_quantize_f32(const ampref_u32* x, ampref_u32* y, ampref_i64 n, const int* P,
                              int rnd, int sat, int subnormals, ampref_u32 k1, ampref_u32 k2,
                              ampref_i64 start) {
    for (ampref_i64 i = 0; i < n; ++i) {
        const ampref_u32 r = ampref_rounding_word(rnd, k1, k2, start + i);
        y[i] = ampref_quantize_bits(ampref_f32_to_f64_bits(x[i]), P, rnd, sat, subnormals, r);
    }
}

void ampref_host_quantize_f64(const ampref_u64* x, ampref_u64* y, ampref_i64 n, const int* P,
                              int rnd, int sat, int subnormals, ampref_u32 k1, ampref_u32 k2,
                              ampref_i64 start) {
    for (ampref_i64 i = 0; i < n; ++i) {
        const ampref_u32 r = ampref_rounding_word(rnd, k1, k2, start + i);
        y[i] = ampref_f32_to_f64_bits(ampref_quantize_bits(x[i], P, rnd, sat, subnormals, r));
    }
}

void ampref_host_encode16_f32(const ampref_u32* x, unsigned short* codes, ampref_i64 n,
                              const int* P) {
    for (ampref_i64 i = 0; i < n; ++i) {
        int is_nan = 0;
        codes[i] = (unsigned short)ampref_encode(ampref_f32_to_f64_bits(x[i]), P,
                                                 AMPREF_RND_NEAREST_EVEN, 0, 1, 0u, &is_nan);
    }
}

void ampref_host_random_bits(ampref_u32* out, ampref_i64 n, ampref_u32 k1, ampref_u32 k2,
                             ampref_i64 start) {
    for (ampref_i64 i = 0; i < n; ++i) out[i] = ampref_random_bits(k1, k2, (ampref_u64)(start + i));
}

void ampref_host_unscale_f32(float* g, ampref_i64 n, ampref_i64* st) {
    const float inv = ampref_inverse_scale(st);
    int bad = 0;
    for (ampref_i64 i = 0; i < n; ++i) bad |= ampref_unscale_f32(g + i, inv);
    if (bad) st[AMPREF_ST_FOUND] = 1;
}

void ampref_host_scaler_update(ampref_i64* st, const double* cfg_d, const ampref_i64* cfg_i) {
    ampref_scaler_update_row(st, cfg_d, cfg_i);
}

void ampref_host_exact_gemm_f32(const double* A, const double* B, float* C, ampref_i64 T,
                                ampref_i64 M, ampref_i64 N, ampref_i64 K, ampref_i64 sa,
                                ampref_i64 sb) {
    for (ampref_i64 o = 0; o < T * M * N; ++o) {
        const ampref_i64 j = o % N, i = (o / N) % M, t = o / (M * N);
        C[o] = ampref_exact_dot_f32(A + t * sa + i * K, 1, B + t * sb + j, N, K, 0);
    }
}

void ampref_host_exact_rows_f32(const double* X, float* out, ampref_i64 R, ampref_i64 L) {
    const double one = 1.0;
    for (ampref_i64 r = 0; r < R; ++r) out[r] = ampref_exact_dot_f32(X + r * L, 1, &one, 0, L, 0);
}

void ampref_host_adam_f32(const float* w, const float* g, const float* m, const float* v,
                          float* out, float* m_out, float* v_out, ampref_i64 n, const float* k,
                          int decoupled, int decay) {
    for (ampref_i64 i = 0; i < n; ++i)
        ampref_adam_element(w, g, m, v, out, m_out, v_out, i, k, decoupled, decay);
}

void ampref_host_adam_f64(const double* w, const double* g, const double* m, const double* v,
                          double* out, double* m_out, double* v_out, ampref_i64 n,
                          const double* k, int decoupled, int decay) {
    for (ampref_i64 i = 0; i < n; ++i)
        ampref_adam_element(w, g, m, v, out, m_out, v_out, i, k, decoupled, decay);
}

void ampref_host_exact_segments_f32(const double* X, const ampref_i64* starts, ampref_i64 S,
                                    ampref_i64 n, ampref_i64 D, float* out) {
    const double one = 1.0;
    for (ampref_i64 o = 0; o < S * D; ++o) {
        const ampref_i64 s = o / D, c = o % D;
        const ampref_i64 lo = starts[s], hi = s + 1 < S ? starts[s + 1] : n;
        out[o] = ampref_exact_dot_f32(X + lo * D + c, D, &one, 0, hi - lo, 1);
    }
}

void ampref_host_rounding_counts_f32(const float* raw, const float* rounded, ampref_i64 n,
                                     ampref_u64* out) {
    for (ampref_i64 i = 0; i < n; ++i) ampref_rounding_counts(raw[i], rounded[i], out, out + 1);
}

void ampref_host_grad_counts_f32(const float* g, ampref_i64 n, float scale, ampref_u64* out) {
    for (ampref_i64 i = 0; i < n; ++i) ampref_grad_counts(g[i], scale, out, out + 1);
}

}  // extern "C"
