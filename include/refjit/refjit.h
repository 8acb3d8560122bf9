// refjit: the one header users include.
#pragma once

#include "refjit/aot.h"
#include "refjit/array.h"
#include "refjit/autodiff.h"
#include "refjit/custom_vjp.h"
#include "refjit/grad.h"
#include "refjit/ir/dtype.h"
#include "refjit/ir/error.h"
#include "refjit/ir/jaxpr.h"
#include "refjit/ir/text.h"
#include "refjit/jit.h"
#include "refjit/loops.h"
#include "refjit/ops.h"
#include "refjit/ref.h"
#include "refjit/trace.h"
#include "refjit/tree.h"
#include "refjit/value.h"
