/* Calls into four archives; prints a sum and the names so that the output is checked. */
#include <cstdio>
#include <cstdlib>
#include "shape.h"
double alpha_area(double); double beta_area(double); double gamma_area(double);
double delta_area(double);
std::string alpha_name(); std::string beta_name(); std::string gamma_name();
std::string delta_name();
int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 1000;
    double sum = 0;
    for (long i = 0; i < rounds; i++)
        sum += alpha_area(i % 7) + beta_area(i % 5) + gamma_area(i % 3) + delta_area(i % 11);
    std::printf("%.1f %s %s %s %s\n", sum, alpha_name().c_str(), beta_name().c_str(),
                gamma_name().c_str(), delta_name().c_str());
    return 0;
}
