/* Compiled loops of tcmp: one pass over a compared pair of float tensors: everything tensor mode's metrics and both sides' stats are
 * made of (tcmp.compare.metrics builds the cells from these sums).
 *
 * numpy needs about twenty passes and as many temporaries for the same numbers (widening copies, differences,
 * relative errors, masks, dots); this loop reads each element of each side once, while it is in a register.
 * The element-wise arithmetic is numpy's, bit for bit: widening float16/bfloat16/float32 to float32 or float64
 * is exact, differences are taken in float64, relative errors in msprobe's result type (float32 unless a side
 * is float64) with its epsilon substitution where the bench is 0, and compared with thresholds rounded to that
 * type (numpy compares a float32 array with a Python float in float32). Only the summation order differs from
 * numpy's: float64 sums in SIMD lanes instead of pairwise blocks.
 *
 * Built as an optional extension (setup.py); without it tcmp computes the same numbers with numpy.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

enum kind { K_FLOAT16 = 0, K_BFLOAT16 = 1, K_FLOAT32 = 2, K_FLOAT64 = 3 };

static const Py_ssize_t ITEMSIZE[] = {2, 2, 4, 8};

typedef union {
    uint32_t u;
    float f;
} bits32_t;

/* Exact float16 -> float32 without branches (so the loop vectorizes): the 15 exponent/mantissa bits shifted into
 * place and the exponent rebiased by a multiplication by 2^112, which also normalizes subnormals exactly; inf and
 * NaN get the all-ones exponent back. */
static inline float half_to_float(uint16_t h) {
    bits32_t v;
    uint32_t magnitude = h & 0x7fffu;
    v.u = magnitude << 13;
    v.f *= 0x1.0p+112f;
    v.u |= (magnitude >= 0x7c00u) ? 0x7f800000u : 0u;
    v.u |= (uint32_t)(h & 0x8000u) << 16;
    return v.f;
}

static inline float bf16_to_float(uint16_t h) {
    bits32_t v;
    v.u = (uint32_t)h << 16;
    return v.f;
}

#define LOAD_K_FLOAT16(p, i) half_to_float(((const uint16_t *)(p))[i])
#define LOAD_K_BFLOAT16(p, i) bf16_to_float(((const uint16_t *)(p))[i])
#define LOAD_K_FLOAT32(p, i) (((const float *)(p))[i])
#define LOAD_K_FLOAT64(p, i) (((const double *)(p))[i])

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
/* AVX2 where the CPU has it, the x86-64 baseline (SSE2) elsewhere: chosen once, at load time. */
#define SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SIMD_CLONES
#endif
#define INLINE static inline __attribute__((always_inline))

/* The pair is walked in blocks that stay in L1: each block is widened to the relative-error type once, then a few
 * short loops with few accumulators each (one loop with all of them does not vectorize). */
#define BLOCK 2048

typedef struct {
    double max, min, sum, squares;
} side_t;

typedef struct {
    double dot, diff_max, diff_min, diff_squares, rel_max;
    long long below_one, below_five;
} cross_t;

/* Everything for one relative-error type RT (float or double). */
#define RT_LOOPS(RT)                                                                                             \
    INLINE void widen_##RT(const void *restrict src, int kind, Py_ssize_t start, Py_ssize_t count,             \
                           RT *restrict dst) {                                                                   \
        switch (kind) {                                                                                          \
            case K_FLOAT16:                                                                                      \
                _Pragma("omp simd") for (Py_ssize_t i = 0; i < count; i++) dst[i] =                              \
                    (RT)LOAD_K_FLOAT16(src, start + i);                                                          \
                break;                                                                                           \
            case K_BFLOAT16:                                                                                     \
                _Pragma("omp simd") for (Py_ssize_t i = 0; i < count; i++) dst[i] =                              \
                    (RT)LOAD_K_BFLOAT16(src, start + i);                                                         \
                break;                                                                                           \
            case K_FLOAT32:                                                                                      \
                _Pragma("omp simd") for (Py_ssize_t i = 0; i < count; i++) dst[i] =                              \
                    (RT)LOAD_K_FLOAT32(src, start + i);                                                          \
                break;                                                                                           \
            default:                                                                                             \
                _Pragma("omp simd") for (Py_ssize_t i = 0; i < count; i++) dst[i] =                              \
                    (RT)LOAD_K_FLOAT64(src, start + i);                                                          \
        }                                                                                                        \
    }                                                                                                            \
                                                                                                                 \
    INLINE void side_##RT(const RT *restrict x, Py_ssize_t count, side_t *s) {                                  \
        double mx = s->max, mn = s->min, sum = s->sum, sq = s->squares;                                          \
        _Pragma("omp simd reduction(max: mx) reduction(min: mn) reduction(+: sum, sq)")                          \
        for (Py_ssize_t i = 0; i < count; i++) {                                                                 \
            double v = (double)x[i];                                                                             \
            mx = v > mx ? v : mx;                                                                                \
            mn = v < mn ? v : mn;                                                                                \
            sum += v;                                                                                            \
            sq += v * v;                                                                                         \
        }                                                                                                        \
        s->max = mx, s->min = mn, s->sum = sum, s->squares = sq;                                                 \
    }                                                                                                            \
                                                                                                                 \
    INLINE void cross_##RT(const RT *restrict n, const RT *restrict b, Py_ssize_t count, cross_t *c) {          \
        double dot = c->dot, d_max = c->diff_max, d_min = c->diff_min, d_sq = c->diff_squares;                   \
        _Pragma("omp simd reduction(max: d_max) reduction(min: d_min) reduction(+: dot, d_sq)")                  \
        for (Py_ssize_t i = 0; i < count; i++) {                                                                 \
            double nv = (double)n[i], bv = (double)b[i], d = nv - bv;                                            \
            dot += nv * bv;                                                                                      \
            d_max = d > d_max ? d : d_max;                                                                       \
            d_min = d < d_min ? d : d_min;                                                                       \
            d_sq += d * d;                                                                                       \
        }                                                                                                        \
        c->dot = dot, c->diff_max = d_max, c->diff_min = d_min, c->diff_squares = d_sq;                          \
        /* relative errors in RT, msprobe's: |n - b| / |b|, and |(n + eps) - eps| / eps where b == 0 */         \
        const RT eps = sizeof(RT) == 4 ? (RT)0x1.0p-23 : (RT)0x1.0p-52;                                          \
        const RT one = (RT)0.001, five = (RT)0.005;                                                              \
        RT r_max = (RT)c->rel_max;                                                                               \
        int c1 = 0, c5 = 0; /* count <= BLOCK */                                                                 \
        _Pragma("omp simd reduction(max: r_max) reduction(+: c1, c5)")                                          \
        for (Py_ssize_t i = 0; i < count; i++) {                                                                 \
            RT nv = n[i], bv = b[i];                                                                             \
            int zero = bv == 0;                                                                                  \
            RT r = (zero ? (nv + eps) - eps : nv - bv) / (zero ? eps : bv);                                      \
            r = r < 0 ? -r : r;                                                                                  \
            r_max = r > r_max ? r : r_max;                                                                       \
            c1 += r < one;                                                                                       \
            c5 += r < five;                                                                                      \
        }                                                                                                        \
        c->rel_max = (double)r_max, c->below_one += c1, c->below_five += c5;                                     \
    }                                                                                                            \
                                                                                                                 \
    SIMD_CLONES static void pair_##RT(const void *np_, int nk, const void *bp_, int bk, Py_ssize_t size,         \
                                      side_t *n, side_t *b, cross_t *c) {                                        \
        RT nbuf[BLOCK], bbuf[BLOCK];                                                                             \
        const int native = sizeof(RT) == 4 ? K_FLOAT32 : K_FLOAT64; /* read in place, not copied */              \
        for (Py_ssize_t start = 0; start < size; start += BLOCK) {                                               \
            Py_ssize_t count = size - start < BLOCK ? size - start : BLOCK;                                      \
            const RT *nv = nk == native ? (const RT *)np_ + start : nbuf;                                        \
            const RT *bv = bk == native ? (const RT *)bp_ + start : bbuf;                                        \
            if (nk != native) widen_##RT(np_, nk, start, count, nbuf);                                           \
            if (bk != native) widen_##RT(bp_, bk, start, count, bbuf);                                           \
            side_##RT(nv, count, n);                                                                             \
            side_##RT(bv, count, b);                                                                             \
            cross_##RT(nv, bv, count, c);                                                                        \
        }                                                                                                        \
    }

RT_LOOPS(float)
RT_LOOPS(double)

/* ---- one side: the summaries' moments (tcmp.compare.moments, engine COMPILED) --------------------------------
 *
 * (min, max, sum, sum of squares) of a chunk of any alignment. The extremes come from the element codes (IEEE
 * floats are sign + magnitude: the largest unsigned code is the most negative value whenever a sign bit is set,
 * the largest signed code the largest value whenever a value is non-negative; when all share a sign, the smallest
 * magnitude is the other extreme), because integer max/min vectorize. Sums are float32 within blocks of
 * MOMENT_BLOCK elements (so they vectorize) and float64 across blocks. NaN/inf make the sum non-finite (float16:
 * the sum is set to NaN, since the bit-level widening maps those codes to large finite numbers); the caller then
 * takes its exact path. */
#define MOMENT_BLOCK 1024

typedef struct {
    int32_t signed_max;
    uint32_t unsigned_max, unsigned_min;
    double sum, squares;
} moments_t;

static inline float float32_of_code(uint32_t code) {
    bits32_t v = {code};
    return v.f;
}

/* float16 -> float32 by bits, as tcmp.compare.moments' numpy engine: the sign-extended code shifted left by 13,
 * the sign copies in bits 30..28 cleared, rebiased by 2^112; exact but for inf/NaN codes, which the caller finds
 * from the extremes of the codes. Not half_to_float: its inf/NaN select made this loop twice as slow (measured),
 * and the pair loop needs that select, since it finds inf/NaN through the values. */
static inline float float32_of_half_code(uint16_t code) {
    bits32_t v;
    v.u = ((uint32_t)(int32_t)(int16_t)code << 13) & 0x8FFFFFFFu;
    return v.f * 0x1.0p+112f;
}

/* One loop per element width: UINT/INT are its codes, WIDEN gives the float32 value of a code. */
#define MOMENTS_LOOP(NAME, UINT, INT, INT_LOWEST, UINT_HIGHEST, WIDEN)                                           \
    SIMD_CLONES static void NAME(const unsigned char *p, Py_ssize_t size, moments_t *m) {                       \
        INT smax = INT_LOWEST;                                                                                   \
        UINT umax = 0, umin = UINT_HIGHEST;                                                                      \
        double total = 0.0, squares = 0.0;                                                                       \
        for (Py_ssize_t start = 0; start < size; start += MOMENT_BLOCK) {                                        \
            Py_ssize_t end = size - start < MOMENT_BLOCK ? size : start + MOMENT_BLOCK;                          \
            float bsum = 0.0f, bsq = 0.0f;                                                                       \
            _Pragma("omp simd reduction(+: bsum, bsq) reduction(max: smax, umax) reduction(min: umin)")          \
            for (Py_ssize_t k = start; k < end; k++) {                                                           \
                UINT code;                                                                                       \
                memcpy(&code, p + sizeof(UINT) * k, sizeof(UINT)); /* any alignment */                           \
                INT scode = (INT)code;                                                                           \
                float value = WIDEN(code);                                                                       \
                bsum += value;                                                                                   \
                bsq += value * value;                                                                            \
                smax = scode > smax ? scode : smax;                                                              \
                umax = code > umax ? code : umax;                                                                \
                umin = code < umin ? code : umin;                                                                \
            }                                                                                                    \
            total += bsum;                                                                                       \
            squares += bsq;                                                                                      \
        }                                                                                                        \
        m->signed_max = smax, m->unsigned_max = umax, m->unsigned_min = umin, m->sum = total;                    \
        m->squares = squares;                                                                                    \
    }

MOMENTS_LOOP(float32_moments_loop, uint32_t, int32_t, INT32_MIN, UINT32_MAX, float32_of_code)
MOMENTS_LOOP(float16_moments_loop, uint16_t, int16_t, INT16_MIN, UINT16_MAX, float32_of_half_code)

static PyObject *moments(PyObject *arg, int half) {
    Py_buffer v;
    if (!PyArg_Parse(arg, "y*", &v)) return NULL;
    Py_ssize_t itemsize = half ? 2 : 4;
    if (v.len % itemsize) {
        PyBuffer_Release(&v);
        return PyErr_Format(PyExc_ValueError, "%zd bytes is not a whole number of elements", v.len);
    }
    moments_t m;
    double low, high;
    Py_BEGIN_ALLOW_THREADS
    if (half) {
        float16_moments_loop(v.buf, v.len / 2, &m);
        uint16_t umax = (uint16_t)m.unsigned_max, umin = (uint16_t)m.unsigned_min;
        int16_t smax = (int16_t)m.signed_max;
        if (umax >= 0xFC00u || smax >= 0x7C00) m.sum = NAN; /* inf or NaN codes */
        low = float32_of_half_code(umax >= 0x8000u ? umax : umin);
        high = float32_of_half_code(smax >= 0 ? (uint16_t)smax : umin);
    } else {
        float32_moments_loop(v.buf, v.len / 4, &m);
        bits32_t lo = {m.unsigned_max >= 0x80000000u ? m.unsigned_max : m.unsigned_min};
        bits32_t hi = {m.signed_max >= 0 ? (uint32_t)m.signed_max : m.unsigned_min};
        low = lo.f, high = hi.f;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    return Py_BuildValue("(dddd)", low, high, m.sum, m.squares);
}

static PyObject *float32_moments(PyObject *module, PyObject *arg) {
    (void)module;
    return moments(arg, 0);
}

static PyObject *float16_moments(PyObject *module, PyObject *arg) {
    (void)module;
    return moments(arg, 1);
}

PyDoc_STRVAR(float32_moments_doc,
             "float32_moments(chunk) -> (min, max, sum, sum of squares) of a float32 buffer of any alignment.");
PyDoc_STRVAR(float16_moments_doc,
             "float16_moments(codes) -> (min, max, sum, sum of squares) of a float16 buffer of any alignment;\n"
             "the sum is NaN when it holds inf or NaN codes.");

/* ---- the module ---------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(pair_sums_doc,
             "pair_sums(npu, npu_kind, bench, bench_kind) -> tuple\n\n"
             "npu and bench: C-contiguous buffers of the same element count, aligned to their element size;\n"
             "kinds: 0 float16, 1 bfloat16, 2 float32, 3 float64. Returns (npu max, min, sum, sum of squares,\n"
             "bench max, min, sum, sum of squares, dot, max and min of npu - bench, sum of its squares,\n"
             "max relative error, count below 0.001, count below 0.005).");

static PyObject *pair_sums(PyObject *module, PyObject *args) {
    Py_buffer n, b;
    int nk, bk;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*iy*i", &n, &nk, &b, &bk)) return NULL;
    PyObject *result = NULL;
    if (nk < 0 || nk > 3 || bk < 0 || bk > 3) {
        PyErr_SetString(PyExc_ValueError, "unknown element kind");
        goto done;
    }
    if (n.len % ITEMSIZE[nk] || b.len % ITEMSIZE[bk] || n.len / ITEMSIZE[nk] != b.len / ITEMSIZE[bk]) {
        PyErr_SetString(PyExc_ValueError, "npu and bench hold different element counts");
        goto done;
    }
    if ((uintptr_t)n.buf % ITEMSIZE[nk] || (uintptr_t)b.buf % ITEMSIZE[bk]) {
        PyErr_SetString(PyExc_ValueError, "buffer not aligned to its element size");
        goto done;
    }
    Py_ssize_t size = n.len / ITEMSIZE[nk];
    side_t ns = {-INFINITY, INFINITY, 0.0, 0.0}, bs = {-INFINITY, INFINITY, 0.0, 0.0};
    cross_t c = {0.0, -INFINITY, INFINITY, 0.0, 0.0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    if (nk == K_FLOAT64 || bk == K_FLOAT64)
        pair_double(n.buf, nk, b.buf, bk, size, &ns, &bs, &c);
    else
        pair_float(n.buf, nk, b.buf, bk, size, &ns, &bs, &c);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(ddddddddddddd" "LL)", ns.max, ns.min, ns.sum, ns.squares, bs.max, bs.min, bs.sum,
                           bs.squares, c.dot, c.diff_max, c.diff_min, c.diff_squares, c.rel_max, c.below_one,
                           c.below_five);
done:
    PyBuffer_Release(&n);
    PyBuffer_Release(&b);
    return result;
}

static PyMethodDef methods[] = {
    {"pair_sums", pair_sums, METH_VARARGS, pair_sums_doc},
    {"float32_moments", float32_moments, METH_O, float32_moments_doc},
    {"float16_moments", float16_moments, METH_O, float16_moments_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fused", "tcmp's fused pair loop (see _fused.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fused(void) { return PyModule_Create(&module_def); }
