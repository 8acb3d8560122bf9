/* Calls the seed's grad-scan loss (slice1 mode, small sizes) compiled ahead of time:
 *
 *   refjit compile --vjp --accum=value,dontwant,dontwant,dontwant,dontwant,dontwant \
 *       --name loss loss_slice1.jaxpr -o loss.o --header loss.h
 *   cc -std=c99 -O2 loss_main.c loss.o -lm -o loss_main
 *
 * One forward call fills the residual struct; the backward is then called twice with
 * different output cotangents (it only reads the residuals). */
#include <stdio.h>
#include <stdlib.h>

#include "loss.h"

int main(void) {
  /* N_ROWS = 3, N_COLS = 4, N_ROW_REPEATS = 1 (state f32[3,8]), N_STEPS = 6. */
  float init_state[3 * 8] = {0};
  const float target_state[3 * 4] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f,
                                     0.7f, 0.8f, 0.9f, 1.0f, 1.1f, 1.2f};
  /* Per step: (insert row, delete row) and (insert column, delete column). */
  const int32_t row_indices[6 * 2] = {0, 1, 1, 2, 2, 0, 0, 0, 1, 1, 2, 2};
  const int32_t col_indices[6 * 2] = {0, 3, 1, 0, 2, 1, 3, 2, 0, 0, 1, 3};
  const float insert_values[6] = {0.5f, 0.9f, 0.3f, 0.7f, 0.2f, 0.8f};
  const float w = 2.0f;

  /* The residuals may be large for big programs: keep them on the heap. */
  loss_residuals* res = malloc(sizeof *res);
  if (!res) return 1;
  float value = 0.0f;
  int rc = loss_fwd(w, init_state, target_state, row_indices, col_indices, insert_values,
                    &value, res);
  if (rc != REFJIT_AOT_OK) {
    fprintf(stderr, "loss_fwd failed: %d\n", rc);
    return 1;
  }
  printf("loss = %.6g\n", value);

  float grad_w = 0.0f;
  rc = loss_bwd(res, 1.0f, &grad_w);
  if (rc != REFJIT_AOT_OK) return 1;
  printf("grad w = %.6g\n", grad_w);

  /* Same residuals, another cotangent: the gradient scales with it. */
  rc = loss_bwd(res, 2.0f, &grad_w);
  if (rc != REFJIT_AOT_OK) return 1;
  printf("grad w (cotangent 2) = %.6g\n", grad_w);

  /* NULL pointers are refused, not dereferenced. */
  printf("null output -> %d\n", loss_bwd(res, 1.0f, NULL));
  free(res);
  return 0;
}
