/* Included by header.jaxpr: the four generated headers in one translation unit. */
#include "prog.h"
#include "grad.h"
#include "gradw.h"
#include "progv.h"
#include "progj.h"
#include "prog.h" /* include guards */

int use_them(void);
int use_them(void) { return (int)sizeof(progv_residuals) + REFJIT_AOT_OK; }
