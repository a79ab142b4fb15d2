/* <math.h> for kernels: the functions an xcargo loader provides (declared in
 * <xcargo/kernel.h>; the allow-list, format-spec section 6), the constants and the
 * classification macros. Anything else from libm is not declared, so a kernel that calls it
 * fails to compile, naming it. */
#ifndef XCARGO_MATH_H
#define XCARGO_MATH_H

#include <xcargo/kernel.h>

#define HUGE_VAL __builtin_huge_val()
#define HUGE_VALF __builtin_huge_valf()
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define isnan(x) __builtin_isnan(x)
#define isinf(x) __builtin_isinf(x)
#define isfinite(x) __builtin_isfinite(x)
#define isnormal(x) __builtin_isnormal(x)
#define signbit(x) __builtin_signbit(x)
#define copysign(x, y) __builtin_copysign((x), (y))
#define copysignf(x, y) __builtin_copysignf((x), (y))

#define M_E 2.7182818284590452354
#define M_LOG2E 1.4426950408889634074
#define M_LOG10E 0.43429448190325182765
#define M_LN2 0.69314718055994530942
#define M_LN10 2.30258509299404568402
#define M_PI 3.14159265358979323846
#define M_PI_2 1.57079632679489661923
#define M_PI_4 0.78539816339744830962
#define M_1_PI 0.31830988618379067154
#define M_2_PI 0.63661977236758134308
#define M_2_SQRTPI 1.12837916709551257390
#define M_SQRT2 1.41421356237309504880
#define M_SQRT1_2 0.70710678118654752440

#endif /* XCARGO_MATH_H */
