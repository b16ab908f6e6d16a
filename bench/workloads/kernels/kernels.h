#include <stdint.h>
/* streams.c: float streams */
void saxpy(float *y, const float *x, float a, int n);
void triad(float *a, const float *b, const float *c, float s, int n);
void poly(float *y, const float *x, int n);
void cmul(float *re, float *im, const float *are, const float *aim, int n);
/* stencils.c: neighbours and small matrices */
void stencil3(float *out, const float *in, int n);
void matvec(float *y, const float *m, const float *x, int rows, int cols);
void blur(float *out, const float *in, int w, int h);
void clamp(float *x, float lo, float hi, int n);
/* integers.c: integer work */
uint64_t idot(const int32_t *a, const int32_t *b, int n);
void mix(uint32_t *x, int n);
void widen(uint16_t *out, const uint8_t *in, int n);
void prefix(int32_t *x, int n);
