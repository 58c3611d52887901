// The exactly rounded float32 dot product of ENG-MM-001, one output element per call,
// for the fused exact GEMM and sum kernels of the CuPy backend (BKD-MM-005).
//
// Included after ampref_kernels.cuh (its types and bit casts), compiled by NVRTC and by
// the host C++ compiler like the rest. The result is fl32 (nearest-even) of the exact
// sum of a[k] * b[k], the unique value the NumPy specification computes
// (ampref/accumulation/certified.py): the phases differ, the value cannot.
//
// Phases, per element:
//   1. approximate: r = sum of the products in float64, in k order, and s = sum of
//      their magnitudes. Every product of two float32 values is exact in float64
//      (48 significant bits, at least 2^-298, below 2^256).
//   2. exact by range: if every product is a multiple of 2^q and s < 2^(52+q), every
//      partial sum is a float64 value, so r is exact and fl32(r) is the answer.
//   3. certify: |r - exact| <= gamma(K) * sum|p| < e = 2 gamma(K+2) s (Higham, Thm 3.1;
//      the factor 2 also covers the rounding of s and of r -+ e); rounding to nearest is
//      monotone, so fl32(r - e) == fl32(r + e) is fl32(exact).
//   4. exact: the rest (sums at or next to a float32 tie with a wide range of terms) are
//      summed again in a fixed-point accumulator of 21 32-bit limbs held in int64 words,
//      bit 0 = 2^-352, then rounded once (the design of ampref/kernels/certify_numba.py).
//
// Specials: a non-finite input makes r non-finite (inf, or NaN for inf - inf and 0 * inf),
// which is the exact model's IEEE value and is returned as fl32(r) (a NaN's payload is not
// specified, as in IEEE 754). Overflow of the rounded result gives +-inf. An exact zero is
// +0 (r starts at +0, and +0 + -0 = +0); a nonzero sum below half the smallest subnormal
// rounds to a zero of its sign. Subnormal inputs and results are exact inputs and
// correctly rounded outputs (no flush to zero: --fmad=false, -ffp-contract=off, and no
// fast-math flag on either build).
#ifndef AMPREF_EXACT_DOT_CUH
#define AMPREF_EXACT_DOT_CUH

#define AMPREF_ACC_BASE 352   // bit 0 of the accumulator is 2^-352 (below 2^-298 * 2^-53)
#define AMPREF_ACC_LIMBS 21   // 672 bits: past K * 2^256 for every K < 2^40
#define AMPREF_LIMB_MASK 0xFFFFFFFFLL

// 2^e as a double, for -1022 <= e <= 1023 (built from its exponent field: exact).
AMPREF_HD double ampref_pow2(int e) {
    return ampref_bits_to_double((ampref_i64)(e + 1023) << 52);
}

AMPREF_HD int ampref_ctz64(ampref_u64 x) {  // x != 0
#if defined(__CUDA_ARCH__)
    return __ffsll((long long)x) - 1;
#else
    return __builtin_ctzll(x);
#endif
}

AMPREF_HD int ampref_clz64(ampref_u64 x) {  // x != 0
#if defined(__CUDA_ARCH__)
    return __clzll((long long)x);
#else
    return __builtin_clzll(x);
#endif
}

// acc += p exactly, p a nonzero finite product of two float32 values: p = mag 2^(E-1075)
// with mag < 2^53 an integer, added as 32-bit pieces to three limbs (carries deferred:
// an int64 limb takes 2^31 such additions).
AMPREF_HD void ampref_acc_add(ampref_i64* acc, double p) {
    const ampref_u64 bits = (ampref_u64)ampref_double_to_bits(p);
    const int E = (int)((bits >> 52) & 0x7FF);           // >= 1: products are normal doubles
    const ampref_i64 mag = (ampref_i64)((bits & 0xFFFFFFFFFFFFFULL) | (1ULL << 52));
    const int off = E - 1075 + AMPREF_ACC_BASE;          // >= 2 for every float32 product
    const int limb = off >> 5, sh = off & 31;
    ampref_i64 lo = (mag & ((1LL << (32 - sh)) - 1)) << sh;
    const ampref_i64 rest = mag >> (32 - sh);
    ampref_i64 mid = rest & AMPREF_LIMB_MASK, hi = rest >> 32;
    if (bits >> 63) { lo = -lo; mid = -mid; hi = -hi; }
    acc[limb] += lo;
    acc[limb + 1] += mid;
    acc[limb + 2] += hi;
}

AMPREF_HD int ampref_acc_bit(const ampref_i64* acc, int b) {  // bit b (b < 0: 0)
    return b >= 0 ? (int)((acc[b >> 5] >> (b & 31)) & 1) : 0;
}

// fl32 (nearest-even) of the accumulator's value; an exact zero gives +0.
AMPREF_HD float ampref_acc_round(ampref_i64* acc) {
    // carries: every limb into [0, 2^32), the sign left in the top limb
    for (int i = 0; i < AMPREF_ACC_LIMBS - 1; ++i) {
        acc[i + 1] += acc[i] >> 32;   // arithmetic shift: floor division by 2^32
        acc[i] &= AMPREF_LIMB_MASK;
    }
    const int neg = acc[AMPREF_ACC_LIMBS - 1] < 0;
    if (neg) {  // magnitude: two's complement over the limbs
        ampref_i64 carry = 1;
        for (int i = 0; i < AMPREF_ACC_LIMBS; ++i) {
            const ampref_i64 v = (~acc[i] & AMPREF_LIMB_MASK) + carry;
            acc[i] = v & AMPREF_LIMB_MASK;
            carry = v >> 32;
        }
    }
    int top = -1;
    for (int i = AMPREF_ACC_LIMBS - 1; i >= 0 && top < 0; --i)
        if (acc[i] != 0) top = i * 32 + 63 - ampref_clz64((ampref_u64)acc[i]);
    if (top < 0) return 0.0f;
    // keep 24 bits, or fewer below float32's normal range (the lowest kept bit 2^-149)
    const int shift = top - 23 > -149 + AMPREF_ACC_BASE ? top - 23 : -149 + AMPREF_ACC_BASE;
    ampref_i64 q = 0;
    for (int k = 0; k < 24; ++k) q |= (ampref_i64)ampref_acc_bit(acc, shift + k) << k;
    const int round = ampref_acc_bit(acc, shift - 1);
    int sticky = 0;  // any bit below the round bit
    for (int b = shift - 2; b >= 0 && !sticky; --b) {
        if ((b & 31) == 31 && acc[b >> 5] == 0) { b -= 31; continue; }  // skip empty limbs
        sticky = ampref_acc_bit(acc, b);
    }
    if (round && (sticky || (q & 1))) q += 1;
    // q * 2^(shift - BASE): q < 2^25 and 2^-149 <= 2^(shift - BASE) < 2^300, both exact in
    // float64; the conversion to float32 is exact or overflows to inf as RNE does
    const double v = (double)q * ampref_pow2(shift - AMPREF_ACC_BASE);
    return (float)(neg ? -v : v);
}

AMPREF_HD ampref_u32 ampref_float_bits(float f) {
    union { float f; ampref_u32 u; } v;
    v.f = f;
    return v.u;
}

// Exponent of the lowest set bit of a nonzero finite double.
AMPREF_HD int ampref_lsb_exponent(double p) {
    const ampref_u64 bits = (ampref_u64)ampref_double_to_bits(p);
    const int E = (int)((bits >> 52) & 0x7FF);
    return E - 1075 + ampref_ctz64((bits & 0xFFFFFFFFFFFFFULL) | (1ULL << 52));
}

// fl32(exact sum_k a[k*sa] * b[k*sb]) for float32 values held in float64 (widened once
// per operand element by the caller, not once per product: conversions are a slow
// pipe on GPUs) (phases in the header comment). neg_zero: a sum of K >= 1 products that
// are all -0 gives -0 (segment sums, which follow float64 sums started at their first
// term) instead of +0 (GEMMs and sums).
AMPREF_HD float ampref_exact_dot_f32(const double* a, ampref_i64 sa, const double* b,
                                     ampref_i64 sb, ampref_i64 K, int neg_zero) {
    // phase 1: approximate, with the magnitude sum and the products' lowest bit
    double r = 0.0, s = 0.0;
    int q = 2000;  // above every product's lowest bit
    for (ampref_i64 k = 0; k < K; ++k) {
        const double p = a[k * sa] * b[k * sb];
        r += p;
        s += p < 0.0 ? -p : p;
        if (p != 0.0 && p - p == 0.0) {
            const int lb = ampref_lsb_exponent(p);
            q = lb < q ? lb : q;
        }
    }
    if (!(r - r == 0.0)) return (float)r;  // inf or NaN: IEEE propagation is the model's
    if (s == 0.0) {                        // every product zero: +0, or -0 (neg_zero)
        int all_negative = neg_zero && K > 0;
        for (ampref_i64 k = 0; k < K && all_negative; ++k)
            all_negative = ampref_double_to_bits(a[k * sa] * b[k * sb]) < 0;
        return all_negative ? -0.0f : 0.0f;
    }
    // phase 2: exact by range (52 + q >= -246: a normal double)
    if (s < ampref_pow2(52 + q)) return (float)r;
    // phase 3: certify with e = 2 gamma(K + 2) s, gamma(n) = n u / (1 - n u), u = 2^-53
    const double nu = (double)(K + 2) * ampref_pow2(-53);
    const double e = 2.0 * (nu / (1.0 - nu)) * s;
    // the ends compared as bit patterns: -0 and +0 are two results (a sum below 2^-150
    // rounds to a zero of its own sign)
    const float lo = (float)(r - e), hi = (float)(r + e);
    if (ampref_float_bits(lo) == ampref_float_bits(hi)) return lo;
    // phase 4: exact
    ampref_i64 acc[AMPREF_ACC_LIMBS];
    for (int i = 0; i < AMPREF_ACC_LIMBS; ++i) acc[i] = 0;
    for (ampref_i64 k = 0; k < K; ++k) {
        const double p = a[k * sa] * b[k * sb];
        if (p != 0.0) ampref_acc_add(acc, p);
    }
    return ampref_acc_round(acc);
}

#endif  // AMPREF_EXACT_DOT_CUH
