// The Adam/AdamW update of one parameter element (ENG-OPT-006, BKD-OPT-001), written for
// NVRTC and the host compiler like the rest of the device numerics.
//
// The same IEEE operations in the same order and dtype as the NumPy specification
// (Adam._update in ampref/engine/optim/optimizers.py) and its compiled twin
// (ampref/kernels/optim_numba.py): each product, sum, quotient and square root is one
// correctly rounded operation (kernels are built with --fmad=false, so b1 * m + c1 * g is
// never contracted into an FMA; NVRTC's default -prec-div/-prec-sqrt give IEEE division
// and square root; the host build has -ffp-contract=off), hence the same bits, NaN, inf
// and subnormal values included (no flush to zero on either build).
#ifndef AMPREF_OPTIM_CUH
#define AMPREF_OPTIM_CUH

AMPREF_HD float ampref_sqrt(float x) {
#if defined(__CUDA_ARCH__)
    return sqrtf(x);
#else
    return __builtin_sqrtf(x);
#endif
}

AMPREF_HD double ampref_sqrt(double x) {
#if defined(__CUDA_ARCH__)
    return sqrt(x);
#else
    return __builtin_sqrt(x);
#endif
}

// k: (1 - lr wd, wd, b1, 1 - b1, b2, 1 - b2, sqrt(1 - b2^t), eps, lr / (1 - b1^t)) in the
// parameter's dtype; decoupled: AdamW (decay multiplies w) else Adam (decay adds wd w to g).
template <typename T>
AMPREF_HD void ampref_adam_element(const T* w, const T* g, const T* m, const T* v, T* out,
                                   T* m_out, T* v_out, ampref_i64 i, const T* k, int decoupled,
                                   int decay) {
    T wi = w[i], gi = g[i];
    if (decoupled && decay) {
        wi = wi * k[0];
    } else if (decay) {
        gi = gi + k[1] * wi;
    }
    const T mi = k[2] * m[i] + k[3] * gi;
    const T vi = k[4] * v[i] + k[5] * (gi * gi);
    m_out[i] = mi;
    v_out[i] = vi;
    const T denom = ampref_sqrt(vi) / k[6] + k[7];
    out[i] = wi - k[8] * (mi / denom);
}

#endif  // AMPREF_OPTIM_CUH
