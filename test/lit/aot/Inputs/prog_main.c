/* Used by header.jaxpr: calls `prog` (plain) and `progv_fwd`/`progv_bwd` (--vjp with
 * --accum=value,ref,dontwant,dontwant,dontwant) from C and prints what `refjit run`
 * prints for the same values. */
#include <stdio.h>
#include <stdlib.h>

#include "prog.h"
#include "progv.h"

static void print_vec(const char* name, const float* v, int n) {
  int i;
  printf("%s = [", name);
  for (i = 0; i < n; ++i) printf(i ? ", %.1f" : "%.1f", v[i]);
  printf("]\n");
}

int main(void) {
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const float w[3] = {0.5f, -1, 2};
  const bool flags[3] = {true, false, true};
  float acc[3] = {10, 20, 30};
  float acc2[3] = {10, 20, 30};
  float out = 0, out2 = 0;
  float grad_x[6];
  float grad_w[3] = {0, 0, 0};
  progv_residuals res;

  if (prog(x, w, flags, 3, acc, &out) != REFJIT_AOT_OK) return 1;
  printf("%g\n", out);
  print_vec("acc", acc, 3);

  if (progv_fwd(x, w, flags, 3, acc2, &out2, &res) != REFJIT_AOT_OK) return 1;
  if (out2 != out || acc2[0] != acc[0] || acc2[1] != acc[1] || acc2[2] != acc[2]) {
    printf("fwd differs from the plain call\n");
    return 1;
  }
  if (progv_bwd(&res, 1.0f, grad_x, grad_w) != REFJIT_AOT_OK) return 1;
  printf("grad x = [[%.1f, %.1f, %.1f], [%.1f, %.1f, %.1f]]\n", grad_x[0], grad_x[1],
         grad_x[2], grad_x[3], grad_x[4], grad_x[5]);
  print_vec("grad w", grad_w, 3);
  if (progv_bwd(&res, 1.0f, grad_x, grad_w) != REFJIT_AOT_OK) return 1;
  print_vec("grad w after a second bwd", grad_w, 3);
  return 0;
}
