// ampref's device numerics, written once for two compilers.
//
// The same source is compiled by NVRTC/nvcc for the CuPy backend (kernels.cu) and by a
// host C++ compiler for the test harness (host_harness.cpp), so the host tests run the
// very integer recipes the GPU runs and compare them bit for bit with the NumPy
// reference (specs/backends.md BKD-QNT-*, BKD-SCL-*). Everything here is integer
// arithmetic on bit patterns, except the loss-scale multiplications, which are single
// IEEE operations (no contraction: kernels are built with --fmad=false, the host with
// -ffp-contract=off).
//
// The quantize recipe is the general kernel of ampref/kernels/encode.py (_encode_chunk) on
// float64 bit patterns: a float32 input is widened exactly (in integers) first, so one
// code path serves both input types and every format, E8M0 included.
#ifndef AMPREF_KERNELS_CUH
#define AMPREF_KERNELS_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define AMPREF_HD __host__ __device__ __forceinline__
#else
#define AMPREF_HD static inline
#endif

typedef unsigned int ampref_u32;
typedef unsigned long long ampref_u64;
typedef long long ampref_i64;

// Rounding modes: the order of ampref.rounding.RoundingMode (checked by a test).
#define AMPREF_RND_NEAREST_EVEN 0
#define AMPREF_RND_NEAREST_AWAY 1
#define AMPREF_RND_TOWARD_ZERO 2
#define AMPREF_RND_TOWARD_POSITIVE 3
#define AMPREF_RND_TOWARD_NEGATIVE 4
#define AMPREF_RND_ODD 5
#define AMPREF_RND_STOCHASTIC 6

// Encodings: the order of ampref.formats.Encoding (checked by a test).
#define AMPREF_ENC_IEEE 0
#define AMPREF_ENC_FN 1
#define AMPREF_ENC_FNUZ 2
#define AMPREF_ENC_FINITE 3
#define AMPREF_ENC_FNU 4

// A format arrives as an int32 parameter row (backends/kernelsrc.py format_params).
#define AMPREF_P_M 0          // mantissa bits
#define AMPREF_P_E 1          // exponent bits
#define AMPREF_P_BIAS 2
#define AMPREF_P_ENC 3
#define AMPREF_P_MINEXP 4     // exponent of the smallest normal
#define AMPREF_P_MAXEXP 5     // exponent of the largest finite value
#define AMPREF_P_MINFIELD 6   // exponent field of the smallest normal
#define AMPREF_P_MAXCODE 7    // magnitude code of max
#define AMPREF_P_INFCODE 8    // -1: no inf
#define AMPREF_P_NANCODE 9    // -1: no NaN
#define AMPREF_P_SUBN 10      // 1: the format has subnormal codes
#define AMPREF_P_BITS 11
#define AMPREF_P_SIGNED 12
#define AMPREF_P_COUNT 13

// ------------------------------------------------------------------------- bit views
// float32 bits -> float64 bits, exactly: sign kept, subnormals normalised, NaN payload
// shifted into place (what an IEEE widening conversion does, without relying on the
// device's conversion instruction or its flush-to-zero setting).
AMPREF_HD ampref_u64 ampref_f32_to_f64_bits(ampref_u32 b) {
    ampref_u64 sign = (ampref_u64)(b >> 31) << 63;
    ampref_u32 ef = (b >> 23) & 0xFFu;
    ampref_u64 m = b & 0x7FFFFFu;
    if (ef == 0xFFu) return sign | (0x7FFull << 52) | (m << 29);
    if (ef == 0) {
        if (m == 0) return sign;
        int n = 0;  // bit length of the subnormal significand (1..23)
        while ((m >> n) != 0) ++n;
        ampref_u64 frac = (m << (53 - n)) & ((1ull << 52) - 1);
        return sign | ((ampref_u64)(n - 150 + 1023) << 52) | frac;
    }
    return sign | ((ampref_u64)(ef - 127 + 1023) << 52) | (m << 29);
}

// ----------------------------------------------------------------- counter-based bits
// srhash (ampref/srhash.py): MurmurHash3's fmix32 over (seed keys, flat index).
AMPREF_HD ampref_u32 ampref_fmix32(ampref_u32 h) {
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    return h ^ (h >> 16);
}

AMPREF_HD ampref_u32 ampref_random_bits(ampref_u32 k1, ampref_u32 k2, ampref_u64 index) {
    ampref_u32 h = ampref_fmix32((ampref_u32)(index & 0xFFFFFFFFull) ^ k1);
    return ampref_fmix32(h ^ (ampref_u32)(index >> 32) ^ k2);
}

// The random word of element `index` when the mode is stochastic (0 otherwise).
AMPREF_HD ampref_u32 ampref_rounding_word(int rnd, ampref_u32 k1, ampref_u32 k2, ampref_i64 index) {
    return rnd == AMPREF_RND_STOCHASTIC ? ampref_random_bits(k1, k2, (ampref_u64)index) : 0u;
}

// ------------------------------------------------------------------ significand rounding
// round(sig / 2^d) in direction rnd for a magnitude; neg marks negative inputs. d >= 1
// is the capped shift, dtrue the uncapped one (stochastic rounding compares the first 32
// bits of the discarded fraction, floor(frac * 2^32), with the random word).
AMPREF_HD ampref_u64 ampref_round_shift(ampref_u64 sig, ampref_u64 d, ampref_u64 dtrue, int rnd,
                                        int neg, ampref_u32 rbits) {
    ampref_u64 q = sig >> d;
    ampref_u64 rem = sig - (q << d);
    switch (rnd) {
    case AMPREF_RND_TOWARD_ZERO:
        return q;
    case AMPREF_RND_NEAREST_EVEN:  // add half-1, plus 1 when the kept part is odd
        return (sig + (q & 1ull) + (1ull << (d - 1)) - 1ull) >> d;
    case AMPREF_RND_NEAREST_AWAY:
        return (sig + (1ull << (d - 1))) >> d;
    case AMPREF_RND_TOWARD_POSITIVE:
        return neg ? q : (sig + (1ull << d) - 1ull) >> d;
    case AMPREF_RND_TOWARD_NEGATIVE:
        return neg ? (sig + (1ull << d) - 1ull) >> d : q;
    case AMPREF_RND_ODD:
        return q | (rem != 0 ? 1ull : 0ull);
    default: {  // stochastic
        ampref_u64 left = dtrue <= 32 ? 32 - dtrue : 0;
        ampref_u64 right = (dtrue > 32 ? dtrue : 32) - 32;
        if (right > 63) right = 63;
        ampref_u64 frac32 = (rem << left) >> right;
        return q + (frac32 > (ampref_u64)rbits ? 1ull : 0ull);
    }
    }
}

AMPREF_HD int ampref_overflow_goes_down(int rnd, int neg) {
    if (rnd == AMPREF_RND_TOWARD_ZERO || rnd == AMPREF_RND_ODD) return 1;
    if (rnd == AMPREF_RND_TOWARD_POSITIVE) return neg;
    if (rnd == AMPREF_RND_TOWARD_NEGATIVE) return !neg;
    return 0;
}

// ------------------------------------------------------------------------- encode
// Code of the float64 value with bits u in the format P (uint32; the sign bit at
// bits-1). *is_nan reports a NaN input (formats without NaN cannot encode it).
AMPREF_HD ampref_u32 ampref_encode(ampref_u64 u, const int* P, int rnd, int sat, int subnormals,
                                   ampref_u32 rbits, int* is_nan_out) {
    const ampref_u64 M = (ampref_u64)P[AMPREF_P_M];
    const int enc = P[AMPREF_P_ENC];
    const int has_inf = P[AMPREF_P_INFCODE] >= 0, has_nan = P[AMPREF_P_NANCODE] >= 0;
    const int has_sub = P[AMPREF_P_SUBN];
    const ampref_u64 max_code = (ampref_u64)(ampref_u32)P[AMPREF_P_MAXCODE];

    // Phase 1: sign, exponent field, integer significand (float64 layout).
    const int neg = (int)(u >> 63);
    const ampref_u64 mag = u & 0x7FFFFFFFFFFFFFFFull;
    const ampref_u64 ef = mag >> 52;
    const int is_nan = mag > 0x7FF0000000000000ull;
    const int is_inf = mag == 0x7FF0000000000000ull;
    const ampref_u64 sig = (mag & ((1ull << 52) - 1)) | ((ef != 0 ? 1ull : 0ull) << 52);
    const ampref_u64 efe = ef > 1 ? ef : 1;  // subnormals share the smallest normal's exponent
    *is_nan_out = is_nan;

    // Phase 2: the shift from the float64 quantum to the target quantum; below the
    // target's normal range the quantum stays fixed (or, without subnormal codes, is
    // the smallest normal itself).
    const ampref_u64 T = (ampref_u64)(P[AMPREF_P_MINEXP] + 1023);
    const ampref_u64 below = (efe > T ? efe : T) - efe;
    ampref_u64 dtrue = below + (52 - M);
    if (!has_sub && below > 0) dtrue += M;
    const ampref_u64 d = dtrue < 54 ? dtrue : 54;  // beyond this every mode's answer is settled

    // Phase 3: round the significand.
    ampref_u64 q = ampref_round_shift(sig, d, dtrue, rnd, neg, rbits);
    int is_zero = q == 0;
    if (!has_sub && below > 0) q <<= M;

    // Phase 4: the magnitude code; a carry out of the significand bumps the exponent by
    // itself. Exponents past the top clamp to one above max (overflow, next phase).
    const ampref_u64 top = (ampref_u64)(P[AMPREF_P_MAXEXP] + 1023 + 1);
    ampref_u64 e_in = efe > T ? efe : T;
    if (e_in > top) e_in = top;
    ampref_u64 code = ((e_in - T + (ampref_u64)P[AMPREF_P_MINFIELD]) << M) + q - (1ull << M);

    // Phase 5: overflow, then specials.
    if (code > max_code && !is_zero && !is_nan && !is_inf) {
        if (sat || !(has_inf || has_nan)) code = max_code;
        else if (ampref_overflow_goes_down(rnd, neg)) code = max_code;
        else code = (ampref_u64)(ampref_u32)(has_inf ? P[AMPREF_P_INFCODE] : P[AMPREF_P_NANCODE]);
    }
    if (!subnormals && code < ((ampref_u64)P[AMPREF_P_MINFIELD] << M)) is_zero = 1;
    if (is_zero) code = 0;
    if (is_inf) {
        code = sat ? max_code
                   : (ampref_u64)(ampref_u32)(has_inf ? P[AMPREF_P_INFCODE]
                                                      : has_nan ? P[AMPREF_P_NANCODE]
                                                                : P[AMPREF_P_MAXCODE]);
    }

    // Phase 6: the sign, per encoding, and NaN codes.
    const ampref_u32 nan = has_nan ? (ampref_u32)P[AMPREF_P_NANCODE] : 0u;
    const ampref_u32 signbit = (ampref_u32)neg << (P[AMPREF_P_BITS] - 1);
    ampref_u32 out;
    if (enc == AMPREF_ENC_FNU) {
        out = (neg || is_nan) ? nan : (ampref_u32)code;
        if ((u << 1) == 0) out = nan;  // E8M0 has no zero: +-0 -> NaN
        return out;
    }
    out = (ampref_u32)code | signbit;
    if (enc == AMPREF_ENC_FNUZ) {
        if (is_zero) out = 0;  // no negative zero
        return is_nan ? nan : out;
    }
    return is_nan ? (nan | signbit) : out;
}

// ------------------------------------------------------------------------- decode
// float32 bits of a code's value (exact: every supported format fits in float32).
// NaN codes give the quiet NaN 0x7FC00000 with the code's sign bit (unsigned formats:
// positive), as ampref.decode does; inf codes give +-inf.
AMPREF_HD ampref_u32 ampref_decode_f32_bits(ampref_u32 c, const int* P) {
    const int M = P[AMPREF_P_M], E = P[AMPREF_P_E], enc = P[AMPREF_P_ENC];
    const ampref_u32 neg = P[AMPREF_P_SIGNED] ? (c >> (P[AMPREF_P_BITS] - 1)) & 1u : 0u;
    const ampref_u32 sign = neg << 31;
    const ampref_u32 mag = c & ((1u << (E + M)) - 1u);
    const ampref_u32 ef = mag >> M, mf = mag & ((1u << M) - 1u);
    int nan = 0, inf = 0;
    if (enc == AMPREF_ENC_IEEE && ef == (1u << E) - 1u) { nan = mf != 0; inf = mf == 0; }
    if (enc == AMPREF_ENC_FN && mag == (1u << (E + M)) - 1u) nan = 1;
    if ((enc == AMPREF_ENC_FNUZ || enc == AMPREF_ENC_FNU) && c == (ampref_u32)P[AMPREF_P_NANCODE]) nan = 1;
    if (nan) return sign | 0x7FC00000u;
    if (inf) return sign | 0x7F800000u;
    const int sub = ef == 0 && P[AMPREF_P_SUBN];
    const ampref_u32 sig = sub ? mf : mf + (1u << M);
    if (sig == 0) return sign;
    const int e = (sub ? 1 : (int)ef) - P[AMPREF_P_BIAS] - M;  // value = sig * 2^e
    int n = 0;
    while ((sig >> n) != 0) ++n;  // bit length, <= 24
    const int e32 = e + n - 1 + 127;
    if (e32 >= 1) return sign | ((ampref_u32)e32 << 23) | ((sig << (24 - n)) & 0x7FFFFFu);
    return sign | (sig << (e + 149));  // float32 subnormal (e >= -149 for every format)
}

// ------------------------------------------------------------------ quantize one element
// One element of ampref.quantize: round, then the exact value (float32 bits). A NaN
// input to a format without NaN (FP4/FP6) gives the quiet NaN 0x7FC00000.
AMPREF_HD ampref_u32 ampref_quantize_bits(ampref_u64 u, const int* P, int rnd, int sat,
                                          int subnormals, ampref_u32 rbits) {
    int is_nan = 0;
    ampref_u32 code = ampref_encode(u, P, rnd, sat, subnormals, rbits, &is_nan);
    if (is_nan && P[AMPREF_P_NANCODE] < 0) return 0x7FC00000u;
    return ampref_decode_f32_bits(code, P);
}

// ------------------------------------------------------------------ loss-scale update
// The transition of ampref/scaling.py for every profile (SCL-UPD-*), on device state.
#define AMPREF_ACT_GROW 0
#define AMPREF_ACT_BACKOFF 1
#define AMPREF_ACT_HOLD 2
#define AMPREF_ACT_SKIP 3
#define AMPREF_ACT_CLAMP 4
#define AMPREF_ACT_RAISE 5

// cfg_d: growth_factor, backoff_factor, min_scale (NaN: none), max_scale (NaN: none)
// cfg_i: growth_interval, growth_rule (equal, at_least, modulo, since_overflow),
//        backoff_op (multiply, divide), arith (f64_to_f32, f32, f64), hysteresis,
//        refill (any_clean, growth), floor (none, clamp, raise), refuse_inf_growth
// st_i:  growth_tracker, hysteresis_tracker, step, last_overflow
AMPREF_HD double ampref_inf(void) {
    union { ampref_u64 i; double d; } v;
    v.i = 0x7FF0000000000000ull;
    return v.d;
}

AMPREF_HD int ampref_isfinite(double x) { return x == x && x - x == 0.0; }

AMPREF_HD double ampref_scale_store(double x, ampref_i64 arith) {
    return arith == 2 ? x : (double)(float)x;
}

AMPREF_HD double ampref_scale_mul(double s, double f, ampref_i64 arith) {
    if (arith == 0) return (double)(float)(s * f);           // float32(float64 product)
    if (arith == 1) return (double)((float)s * (float)f);    // an IEEE float32 multiply
    double p = s * f;
    return ampref_isfinite(p) ? p : ampref_inf();
}

AMPREF_HD double ampref_scale_div(double s, double f, ampref_i64 arith) {
    if (arith == 1) return (double)((float)s / (float)f);
    return ampref_scale_store(s / f, arith);
}

AMPREF_HD int ampref_scaler_step(double* scale, ampref_i64* st_i, int found_inf,
                                 const double* cfg_d, const ampref_i64* cfg_i) {
    const ampref_i64 interval = cfg_i[0], rule = cfg_i[1], divide = cfg_i[2], arith = cfg_i[3];
    const ampref_i64 hysteresis = cfg_i[4], refill = cfg_i[5], floor_mode = cfg_i[6];
    const int has_min = cfg_d[2] == cfg_d[2], has_max = cfg_d[3] == cfg_d[3];
    const ampref_i64 step = st_i[2] + 1;
    if (found_inf) {
        const ampref_i64 hyst = st_i[1] - 1;
        int action = AMPREF_ACT_SKIP;
        double s = *scale;
        if (hyst <= 0) {
            if (floor_mode == 2 && has_min && *scale == cfg_d[2]) return AMPREF_ACT_RAISE;
            s = divide ? ampref_scale_div(*scale, cfg_d[0], arith)
                       : ampref_scale_mul(*scale, cfg_d[1], arith);
            action = AMPREF_ACT_BACKOFF;
            if (has_min && floor_mode != 0 && s < cfg_d[2]) {
                s = ampref_scale_store(cfg_d[2], arith);
                action = AMPREF_ACT_CLAMP;
            }
        }
        *scale = s;
        st_i[0] = 0; st_i[1] = hyst; st_i[2] = step; st_i[3] = step;
        return action;
    }
    ampref_i64 hyst = refill == 0 ? hysteresis : st_i[1];
    ampref_i64 tracker = st_i[0] + 1;
    int due;
    if (rule == 0) due = tracker == interval;
    else if (rule == 1) due = tracker >= interval;
    else if (rule == 2) due = st_i[0] == interval - 1;
    else {
        const ampref_i64 stable = step - st_i[3] - 1;
        due = stable > 0 && stable % interval == 0;
    }
    int action = AMPREF_ACT_HOLD;
    if (due) {
        tracker = 0;
        if (refill == 1) hyst = hysteresis;
        double cand = ampref_scale_mul(*scale, cfg_d[0], arith);
        if (has_max && cfg_d[3] < cand) cand = cfg_d[3];  // Python's min(cand, max_scale)
        if (!(cfg_i[7] && !ampref_isfinite(cand))) { *scale = cand; action = AMPREF_ACT_GROW; }
    } else if (rule == 2) {
        tracker = tracker % interval;
    }
    st_i[0] = tracker; st_i[1] = hyst; st_i[2] = step;
    return action;
}

// The scaler's device state: one int64 row, the scale's float64 bit pattern first, so
// that one copy to the host per step carries the whole decision.
#define AMPREF_ST_SCALE 0
#define AMPREF_ST_GROWTH 1
#define AMPREF_ST_HYST 2
#define AMPREF_ST_STEP 3
#define AMPREF_ST_LAST_OVERFLOW 4
#define AMPREF_ST_FOUND 5
#define AMPREF_ST_ACTION 6
#define AMPREF_ST_COUNT 8

AMPREF_HD double ampref_bits_to_double(ampref_i64 b) {
    union { ampref_i64 i; double d; } v;
    v.i = b;
    return v.d;
}

AMPREF_HD ampref_i64 ampref_double_to_bits(double d) {
    union { ampref_i64 i; double d; } v;
    v.d = d;
    return v.i;
}

// One update on the state row: reads and clears the found flag, records the action.
AMPREF_HD void ampref_scaler_update_row(ampref_i64* st, const double* cfg_d, const ampref_i64* cfg_i) {
    double scale = ampref_bits_to_double(st[AMPREF_ST_SCALE]);
    const int found = st[AMPREF_ST_FOUND] != 0;
    const int action = ampref_scaler_step(&scale, st + AMPREF_ST_GROWTH, found, cfg_d, cfg_i);
    st[AMPREF_ST_SCALE] = ampref_double_to_bits(scale);
    st[AMPREF_ST_ACTION] = action;
}

// float32(1 / float64(scale)) from the state row (+inf for a zero scale), as torch.
AMPREF_HD float ampref_inverse_scale(const ampref_i64* st) {
    const double scale = ampref_bits_to_double(st[AMPREF_ST_SCALE]);
    return scale != 0.0 ? (float)(1.0 / scale) : (float)ampref_inf();
}

// Unscale one float32 gradient element in place (torch's non-finite check and unscale):
// g = fl32(g * inv); the check looks at the scaled value. Returns 1 if it was not finite.
AMPREF_HD int ampref_unscale_f32(float* g, float inv) {
    const float v = *g;
    *g = v * inv;
    return !(v == v && v - v == 0.0f);
}

#endif  // AMPREF_KERNELS_CUH
