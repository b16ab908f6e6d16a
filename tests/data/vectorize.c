/* A loop the loop vectorizer takes at -O3 (restrict: no aliasing checks needed). */
void saxpy(float *restrict y, const float *restrict x, float a, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}
