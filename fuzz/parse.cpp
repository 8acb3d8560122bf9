// fuzz_parse: jaxpr text -> parse (which verifies) -> print -> parse -> print.
// refjit::Error on the first parse is expected (malformed text). A finding is a crash, a
// sanitizer report, a non-refjit exception, printed text that does not parse back, or
// print(parse(print(x))) != print(x).
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"

using namespace refjit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Jaxpr jaxpr;
  try {
    jaxpr = parse_jaxpr(input, "fuzz");
    verify(jaxpr);
  } catch (const Error&) {
    return 0;  // rejected with a proper message: fine
  }
  const std::string printed = print_jaxpr(jaxpr);
  Jaxpr again;
  try {
    again = parse_jaxpr(printed, "printed");
    verify(again);
  } catch (const Error& e) {
    fuzz::fail("printed jaxpr does not parse back", std::string(e.what()) + "\n" + printed, input);
  }
  const std::string reprinted = print_jaxpr(again);
  if (reprinted != printed)
    fuzz::fail("print(parse(print(x))) != print(x)",
               "first print:\n" + printed + "\nsecond print:\n" + reprinted, input);
  return 0;
}
