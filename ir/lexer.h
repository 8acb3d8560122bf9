// Internal: the tokens of the jaxpr text format (docs/ir.md), with source positions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace refjit::text {

enum class Tok : uint8_t {
  ident,     // c, f32, scatter-add, lambda, True, None, ...
  integer,   // 3, -3
  real,      // 2.0, -1e-05, -inf (plain inf and nan are identifiers)
  complex,   // Python's complex repr: 2j, 0j, -1.5j, (1+2j), (-0-1j), (nan+infj)
  string,    // 'quoted' or "quoted" (only inside params JAX prints and we ignore)
  lbrace,    // {
  rbrace,    // }
  lbracket,  // [
  rbracket,  // ]
  lparen,    // (
  rparen,    // )
  colon,     // :
  semi,      // ;
  dot,       // .
  comma,     // ,
  equal,     // =
  plus,      // +
  arrow,     // <-
  plus_eq,   // +=
  ellipsis,  // ...
  other,     // any other character; the parser reports it where it is not expected
  end,       // end of input
};

struct Token {
  Tok kind = Tok::end;
  std::string_view text;  // a view into the source
  int line = 1;
  int col = 1;
  size_t offset = 0;  // byte offset of the first character

  size_t end_offset() const { return offset + text.size(); }
  bool is(Tok k) const { return kind == k; }
  bool is_ident(std::string_view s) const { return kind == Tok::ident && text == s; }
};

// Splits the whole text into tokens; whitespace and `#` / `//` line comments separate
// tokens. Never fails: characters outside the format become Tok::other. The last token is
// always Tok::end.
std::vector<Token> tokenize(std::string_view source);

// How a token is named in an error message: 'c', 'end of input', ...
std::string describe(const Token& t);

}  // namespace refjit::text
