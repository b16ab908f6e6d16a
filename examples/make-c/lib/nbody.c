#include <math.h>
#include "dp.h"

/* Floating-point n-body integration: reassociation (-ffast-math) changes its result. */
#define MAX_BODIES 64

double dp_nbody_energy_after(int bodies, int steps) {
    double x[MAX_BODIES], y[MAX_BODIES], z[MAX_BODIES];
    double vx[MAX_BODIES], vy[MAX_BODIES], vz[MAX_BODIES], mass[MAX_BODIES];
    dp_rng r;
    dp_rng_seed(&r, 42);
    if (bodies > MAX_BODIES) bodies = MAX_BODIES;
    for (int i = 0; i < bodies; i++) {
        x[i] = dp_rng_unit(&r) * 10; y[i] = dp_rng_unit(&r) * 10; z[i] = dp_rng_unit(&r) * 10;
        vx[i] = dp_rng_unit(&r) - 0.5; vy[i] = dp_rng_unit(&r) - 0.5; vz[i] = dp_rng_unit(&r) - 0.5;
        mass[i] = 0.5 + dp_rng_unit(&r);
    }
    const double dt = 0.001;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < bodies; i++) {
            double ax = 0, ay = 0, az = 0;
            for (int j = 0; j < bodies; j++) {
                if (j == i) continue;
                double dx = x[j] - x[i], dy = y[j] - y[i], dz = z[j] - z[i];
                double d2 = dx * dx + dy * dy + dz * dz + 0.01;
                double inv = mass[j] / (d2 * sqrt(d2));
                ax += dx * inv; ay += dy * inv; az += dz * inv;
            }
            vx[i] += ax * dt; vy[i] += ay * dt; vz[i] += az * dt;
        }
        for (int i = 0; i < bodies; i++) { x[i] += vx[i] * dt; y[i] += vy[i] * dt; z[i] += vz[i] * dt; }
    }
    double e = 0;
    for (int i = 0; i < bodies; i++) {
        e += 0.5 * mass[i] * (vx[i] * vx[i] + vy[i] * vy[i] + vz[i] * vz[i]);
        for (int j = i + 1; j < bodies; j++) {
            double dx = x[j] - x[i], dy = y[j] - y[i], dz = z[j] - z[i];
            e -= mass[i] * mass[j] / sqrt(dx * dx + dy * dy + dz * dz + 0.01);
        }
    }
    return e;
}
