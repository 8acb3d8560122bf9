// Differential test of every program in test/data/ and test/lit/Inputs/: the native
// backend (both tiers) must agree with the interpreter on deterministic inputs.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"

namespace refjit::testing {
namespace {

namespace fs = std::filesystem;

fs::path test_dir() {
  if (const char* d = std::getenv("REFJIT_TEST_DATA")) return d;
  return fs::path(__FILE__).parent_path().parent_path();
}

std::vector<fs::path> programs() {
  std::vector<fs::path> out;
  for (const char* sub : {"data", "lit/Inputs"}) {
    fs::path dir = test_dir() / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().extension() == ".jaxpr") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One value per constvar then invar; refs get a fresh buffer.
std::vector<RtValue> inputs_for(const Jaxpr& j) {
  std::vector<RtValue> args;
  uint32_t seed = 1;
  auto add = [&](Var v) {
    Type t = j.type_of(v);
    Array a = random_array(t.array, seed++);
    if (t.is_ref)
      args.push_back(ref_of(std::move(a)));
    else
      args.emplace_back(std::move(a));
  };
  for (Var v : j.constvars) add(v);
  for (Var v : j.invars) add(v);
  return args;
}

TEST(NativeDataPrograms, EveryProgramMatchesTheInterpreterAtBothTiers) {
  std::vector<fs::path> files = programs();
  ASSERT_GE(files.size(), 9u) << "test data not found under " << test_dir();
  for (const fs::path& p : files) {
    SCOPED_TRACE(p.string());
    Jaxpr j = parse_jaxpr(read_file(p));
    std::vector<RtValue> args = inputs_for(j);
    for (int opt : {0, 3}) {
      SCOPED_TRACE("opt_level " + std::to_string(opt));
      expect_matches_interpreter(j, args, 1e-5, CompileOptions{.opt_level = opt});
    }
  }
}

}  // namespace
}  // namespace refjit::testing
