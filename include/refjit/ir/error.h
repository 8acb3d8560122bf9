// Errors raised by refjit. Every message says what was wrong, where, and how to fix it.
#pragma once

#include <stdexcept>
#include <string>

namespace refjit {

// Base of every error refjit throws on bad input or wrong use.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A shape/dtype mismatch found by a primitive's type rule or the verifier.
class TypeError : public Error {
 public:
  using Error::Error;
};

// Malformed jaxpr text; what() is "FILE:LINE:COL: error: ...".
class ParseError : public Error {
 public:
  ParseError(std::string file, int line, int col, const std::string& message)
      : Error(file + ":" + std::to_string(line) + ":" + std::to_string(col) +
              ": error: " + message),
        file_(std::move(file)),
        line_(line),
        col_(col) {}
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int col() const { return col_; }

 private:
  std::string file_;
  int line_;
  int col_;
};

// A program reverse mode cannot differentiate: a while loop, whose number of iterations is
// known only when it runs, leaves no tape to run backwards.
class ReverseModeError : public Error {
 public:
  using Error::Error;
};

// A program refjit runs but will not differentiate, because what JAX would differentiate it
// with is not in the program: a custom_vjp whose rules JAX's printout names but leaves out.
class NotDifferentiableError : public Error {
 public:
  using Error::Error;
};

// Wrong use of refs or of an autodiff API (REFS.md section 3). `code` is "E1".."E12".
class RefError : public Error {
 public:
  RefError(std::string code, const std::string& message) : Error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

}  // namespace refjit
