// Training statistics counted on the device (BKD-STA-001): the predicates of
// ampref/training/stats.py and run.py on one element, for NVRTC and the host compiler.
// Counting is exact integer work, so any thread and atomic order gives the same counts.
#ifndef AMPREF_COUNTS_CUH
#define AMPREF_COUNTS_CUH

AMPREF_HD int ampref_finite_f32(float x) { return x == x && x - x == 0.0f; }

// A gradient element rounded into a low format: underflow (a finite nonzero value became
// zero) and overflow (a finite value became +-inf or NaN).
AMPREF_HD void ampref_rounding_counts(float raw, float rounded, ampref_u64* under,
                                      ampref_u64* over) {
    const int fin = ampref_finite_f32(raw);
    *under += (ampref_u64)(raw != 0.0f && fin && rounded == 0.0f);
    *over += (ampref_u64)(fin && !ampref_finite_f32(rounded));
}

// A gradient element: nonzero (NaN counts, as numpy.count_nonzero), and nonzero but
// below fp16's smallest subnormal 2^-24 by half once multiplied by the float32 scale
// (fl32(|g| * scale) < 2^-25; NaN compares false).
AMPREF_HD void ampref_grad_counts(float g, float scale, ampref_u64* nonzero, ampref_u64* tiny) {
    const float mag = g < 0.0f ? -g : g;
    *nonzero += (ampref_u64)(g != 0.0f);
    *tiny += (ampref_u64)(g != 0.0f && mag * scale < 2.98023223876953125e-8f);
}

#endif  // AMPREF_COUNTS_CUH
