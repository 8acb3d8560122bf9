#include "ir/lexer.h"

namespace refjit::text {

namespace {

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space_and_comments();
      Token t = lex_one();
      out.push_back(t);
      if (t.kind == Tok::end) return out;
    }
  }

 private:
  char at(size_t k) const { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; }
  bool done() const { return pos_ >= src_.size(); }

  void advance(size_t n = 1) {
    for (size_t k = 0; k < n && !done(); ++k) {
      if (src_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
      ++pos_;
    }
  }

  void skip_space_and_comments() {
    while (!done()) {
      char c = at(0);
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        advance();
      } else if (c == '#' || (c == '/' && at(1) == '/')) {
        while (!done() && at(0) != '\n') advance();
      } else {
        return;
      }
    }
  }

  Token make(Tok kind, size_t start, int line, int col) const {
    return Token{kind, src_.substr(start, pos_ - start), line, col, start};
  }

  // digits [. digits] [e [+-] digits]; the caller has consumed an optional '-'.
  Tok lex_number_body() {
    bool real = false;
    while (is_digit(at(0))) advance();
    if (at(0) == '.' && is_digit(at(1))) {
      real = true;
      advance();
      while (is_digit(at(0))) advance();
    }
    if ((at(0) == 'e' || at(0) == 'E') &&
        (is_digit(at(1)) || ((at(1) == '+' || at(1) == '-') && is_digit(at(2))))) {
      real = true;
      advance(2);
      while (is_digit(at(0))) advance();
    }
    return real ? Tok::real : Tok::integer;
  }

  // How many characters of a real number (digits, '.', an exponent; inf or nan) start at
  // offset k, after an optional sign; 0 if none. Looks ahead without consuming.
  size_t real_length_at(size_t k) const {
    size_t n = k;
    if (at(n) == '-' || at(n) == '+') ++n;
    if (src_.substr(pos_ + n, 3) == "inf" || src_.substr(pos_ + n, 3) == "nan") return n + 3 - k;
    if (!is_digit(at(n))) return 0;
    while (is_digit(at(n))) ++n;
    if (at(n) == '.' && is_digit(at(n + 1))) {
      ++n;
      while (is_digit(at(n))) ++n;
    }
    if ((at(n) == 'e' || at(n) == 'E') &&
        (is_digit(at(n + 1)) || ((at(n + 1) == '+' || at(n + 1) == '-') && is_digit(at(n + 2))))) {
      n += 2;
      while (is_digit(at(n))) ++n;
    }
    return n - k;
  }

  // Python's complex repr at the current position: `(RE+IMj)` / `(RE-IMj)`, or a bare
  // imaginary `IMj` (a real followed directly by j); its length, or 0.
  size_t complex_length() const {
    if (at(0) == '(') {
      size_t re = real_length_at(1);
      if (re == 0) return 0;
      size_t k = 1 + re;
      if (at(k) != '+' && at(k) != '-') return 0;
      size_t im = real_length_at(k);
      if (im == 0) return 0;
      k += im;
      return at(k) == 'j' && at(k + 1) == ')' ? k + 2 : 0;
    }
    // infj and nanj stay identifiers, as inf and nan do (JAX may name a variable so).
    if (is_ident_start(at(0))) return 0;
    size_t im = real_length_at(0);
    if (im == 0 || at(im) != 'j' || is_ident_char(at(im + 1))) return 0;
    return im + 1;
  }

  // [A-Za-z_][A-Za-z0-9_]* with inner hyphens joining words (scatter-add).
  void lex_ident_body() {
    while (is_ident_char(at(0))) advance();
    while (at(0) == '-' && is_ident_start(at(1))) {
      advance();
      while (is_ident_char(at(0))) advance();
    }
  }

  Token lex_one() {
    size_t start = pos_;
    int line = line_, col = col_;
    if (done()) return Token{Tok::end, src_.substr(src_.size()), line, col, src_.size()};
    char c = at(0);
    if (size_t n = complex_length(); n > 0) {
      advance(n);
      return make(Tok::complex, start, line, col);
    }
    if (is_ident_start(c)) {
      lex_ident_body();
      // inf and nan stay identifiers: JAX may name a variable `inf`; the parser reads them
      // as numbers only where a literal value stands (`inf:f32[]`).
      return make(Tok::ident, start, line, col);
    }
    if (is_digit(c)) return make(lex_number_body(), start, line, col);
    if (c == '-' && is_digit(at(1))) {
      advance();
      return make(lex_number_body(), start, line, col);
    }
    if (c == '-' && src_.substr(pos_ + 1, 3) == "inf" && !is_ident_char(at(4))) {
      advance(4);
      return make(Tok::real, start, line, col);
    }
    if (c == '\'' || c == '"') {
      advance();
      while (!done() && at(0) != c && at(0) != '\n') advance();
      if (at(0) == c) advance();
      return make(Tok::string, start, line, col);
    }
    auto punct = [&](Tok k, size_t n) {
      advance(n);
      return make(k, start, line, col);
    };
    switch (c) {
      case '{': return punct(Tok::lbrace, 1);
      case '}': return punct(Tok::rbrace, 1);
      case '[': return punct(Tok::lbracket, 1);
      case ']': return punct(Tok::rbracket, 1);
      case '(': return punct(Tok::lparen, 1);
      case ')': return punct(Tok::rparen, 1);
      case ':': return punct(Tok::colon, 1);
      case ';': return punct(Tok::semi, 1);
      case ',': return punct(Tok::comma, 1);
      case '=': return punct(Tok::equal, 1);
      case '.':
        if (at(1) == '.' && at(2) == '.') return punct(Tok::ellipsis, 3);
        return punct(Tok::dot, 1);
      case '+':
        if (at(1) == '=') return punct(Tok::plus_eq, 2);
        return punct(Tok::plus, 1);
      case '<':
        if (at(1) == '-') return punct(Tok::arrow, 2);
        return punct(Tok::other, 1);
      default: break;
    }
    // One UTF-8 sequence (or one stray byte) as a single `other` token.
    size_t n = 1;
    auto u = static_cast<unsigned char>(c);
    if (u >= 0xC0) n = u >= 0xF0 ? 4 : u >= 0xE0 ? 3 : 2;
    return punct(Tok::other, n);
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

std::string describe(const Token& t) {
  if (t.kind == Tok::end) return "end of input";
  std::string s(t.text.substr(0, 40));
  if (t.text.size() > 40) s += "...";
  return "'" + s + "'";
}

}  // namespace refjit::text
