// SPDX-License-Identifier: Apache-2.0
#include "engine/json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace sinkscope::json {

namespace {

const char kHex[] = "0123456789abcdef";

void append_u_escape(std::string& out, unsigned cp) {
  out += "\\u";
  out += kHex[(cp >> 12) & 0xf];
  out += kHex[(cp >> 8) & 0xf];
  out += kHex[(cp >> 4) & 0xf];
  out += kHex[cp & 0xf];
}

// Length of the well-formed UTF-8 sequence starting at s[i] (Unicode table 3-7), or 0 when the
// bytes there are not one. On 0, *bad_len is the length of the maximal ill-formed subpart, which
// is replaced by a single U+FFFD (the W3C / Unicode "best practice" substitution).
size_t utf8_sequence(std::string_view s, size_t i, size_t* bad_len) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t need;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    need = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 3;
    if (c == 0xe0) lo = 0xa0;  // no overlong forms
    if (c == 0xed) hi = 0x9f;  // no UTF-16 surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 4;
    if (c == 0xf0) lo = 0x90;  // no overlong forms
    if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
  } else {
    *bad_len = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < need; ++k) {
    if (i + k >= s.size()) break;
    const unsigned char x = b(i + k);
    const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xbf);
    if (!ok) break;
  }
  if (k == need) return need;
  *bad_len = k;
  return 0;
}

void append_escaped(std::string& out, std::string_view s) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t bad = 0;
      const size_t n = utf8_sequence(s, i, &bad);
      if (n) {
        out.append(s.data() + i, n);
        i += n;
      } else {
        append_u_escape(out, 0xfffd);
        i += bad;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          append_u_escape(out, c);
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

}  // namespace

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_escaped(out, s);
  return out;
}

std::string format_number(double v) {
  if (!std::isfinite(v)) return "null";
  // std::to_chars without a precision gives the shortest text that parses back to exactly v.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// ---- Writer ---------------------------------------------------------------------------------

void Writer::newline_indent(size_t depth) {
  if (m_indent <= 0) return;
  m_out += '\n';
  m_out.append(depth * static_cast<size_t>(m_indent), ' ');
}

void Writer::before_value() {
  if (m_stack.empty()) {
    if (m_has_root) throw std::logic_error("json::Writer: a second top-level value");
    m_has_root = true;
    return;
  }
  Level& top = m_stack.back();
  if (top.object) {
    if (!top.key_pending) throw std::logic_error("json::Writer: object value without a key");
    top.key_pending = false;
    return;
  }
  if (!top.empty) m_out += ',';
  top.empty = false;
  newline_indent(m_stack.size());
}

Writer& Writer::key(std::string_view k) {
  if (m_stack.empty() || !m_stack.back().object)
    throw std::logic_error("json::Writer: key outside an object");
  Level& top = m_stack.back();
  if (top.key_pending) throw std::logic_error("json::Writer: two keys in a row");
  if (!top.empty) m_out += ',';
  top.empty = false;
  top.key_pending = true;
  newline_indent(m_stack.size());
  append_escaped(m_out, k);
  m_out += m_indent > 0 ? ": " : ":";
  return *this;
}

Writer& Writer::begin_object() {
  before_value();
  m_out += '{';
  m_stack.push_back({true});
  return *this;
}

Writer& Writer::begin_array() {
  before_value();
  m_out += '[';
  m_stack.push_back({false});
  return *this;
}

Writer& Writer::end_object() {
  if (m_stack.empty() || !m_stack.back().object)
    throw std::logic_error("json::Writer: end_object without an open object");
  if (m_stack.back().key_pending) throw std::logic_error("json::Writer: key without a value");
  const bool empty = m_stack.back().empty;
  m_stack.pop_back();
  if (!empty) newline_indent(m_stack.size());
  m_out += '}';
  return *this;
}

Writer& Writer::end_array() {
  if (m_stack.empty() || m_stack.back().object)
    throw std::logic_error("json::Writer: end_array without an open array");
  const bool empty = m_stack.back().empty;
  m_stack.pop_back();
  if (!empty) newline_indent(m_stack.size());
  m_out += ']';
  return *this;
}

Writer& Writer::raw(std::string_view text) {
  before_value();
  m_out += text;
  return *this;
}

Writer& Writer::value(std::string_view s) {
  before_value();
  append_escaped(m_out, s);
  return *this;
}

Writer& Writer::value(bool b) {
  return raw(b ? "true" : "false");
}
Writer& Writer::value(double v) {
  return raw(format_number(v));
}
Writer& Writer::null() {
  return raw("null");
}
Writer& Writer::write_signed(int64_t v) {
  return raw(std::to_string(v));
}
Writer& Writer::write_unsigned(uint64_t v) {
  return raw(std::to_string(v));
}

// ---- Value ----------------------------------------------------------------------------------

const char* type_name(Type t) {
  switch (t) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "a boolean";
    case Type::kNumber:
      return "a number";
    case Type::kString:
      return "a string";
    case Type::kArray:
      return "an array";
    case Type::kObject:
      return "an object";
  }
  return "?";
}

namespace {
[[noreturn]] void type_mismatch(Type want, Type got) {
  throw JsonError(std::string("expected ") + type_name(want) + ", got " + type_name(got), 0);
}
}  // namespace

Value::Value(int64_t v)
    : m_type(Type::kNumber), m_is_int(true), m_number(static_cast<double>(v)), m_int(v) {}

bool Value::as_bool() const {
  if (m_type != Type::kBool) type_mismatch(Type::kBool, m_type);
  return m_bool;
}

double Value::as_number() const {
  if (m_type != Type::kNumber) type_mismatch(Type::kNumber, m_type);
  return m_number;
}

int64_t Value::as_int() const {
  if (m_type != Type::kNumber) type_mismatch(Type::kNumber, m_type);
  if (m_is_int) return m_int;
  // 2^63 is exactly representable; anything at or above it does not fit.
  if (std::trunc(m_number) != m_number || m_number < -9223372036854775808.0 ||
      m_number >= 9223372036854775808.0)
    throw JsonError("expected an integer, got " + format_number(m_number), 0);
  return static_cast<int64_t>(m_number);
}

const std::string& Value::as_string() const {
  if (m_type != Type::kString) type_mismatch(Type::kString, m_type);
  return m_string;
}
const Value::Array& Value::as_array() const {
  if (m_type != Type::kArray) type_mismatch(Type::kArray, m_type);
  return m_array;
}
const Value::Object& Value::as_object() const {
  if (m_type != Type::kObject) type_mismatch(Type::kObject, m_type);
  return m_object;
}
Value::Array& Value::as_array() {
  if (m_type != Type::kArray) type_mismatch(Type::kArray, m_type);
  return m_array;
}
Value::Object& Value::as_object() {
  if (m_type != Type::kObject) type_mismatch(Type::kObject, m_type);
  return m_object;
}

const Value* Value::find(std::string_view key) const {
  if (m_type != Type::kObject) return nullptr;
  for (const auto& [k, v] : m_object)
    if (k == key) return &v;
  return nullptr;
}

const Value& Value::operator[](std::string_view key) const {
  if (m_type != Type::kObject) type_mismatch(Type::kObject, m_type);
  if (const Value* v = find(key)) return *v;
  throw JsonError("missing key '" + std::string(key) + "'", 0);
}

const Value& Value::operator[](size_t index) const {
  const Array& a = as_array();
  if (index >= a.size())
    throw JsonError(
        "index " + std::to_string(index) + " out of range (size " + std::to_string(a.size()) + ")",
        0);
  return a[index];
}

size_t Value::size() const {
  if (m_type == Type::kArray) return m_array.size();
  if (m_type == Type::kObject) return m_object.size();
  return 0;
}

Value& Value::set(std::string key, Value v) {
  if (m_type == Type::kNull) m_type = Type::kObject;
  Object& o = as_object();
  for (auto& [k, old] : o) {
    if (k == key) {
      old = std::move(v);
      return old;
    }
  }
  o.emplace_back(std::move(key), std::move(v));
  return o.back().second;
}

Value& Value::push_back(Value v) {
  if (m_type == Type::kNull) m_type = Type::kArray;
  Array& a = as_array();
  a.push_back(std::move(v));
  return a.back();
}

bool Value::operator==(const Value& other) const {
  if (m_type != other.m_type) return false;
  switch (m_type) {
    case Type::kNull:
      return true;
    case Type::kBool:
      return m_bool == other.m_bool;
    case Type::kNumber:
      if (m_is_int && other.m_is_int) return m_int == other.m_int;
      return m_number == other.m_number;
    case Type::kString:
      return m_string == other.m_string;
    case Type::kArray:
      return m_array == other.m_array;
    case Type::kObject:
      return m_object == other.m_object;
  }
  return false;
}

// ---- Parser ---------------------------------------------------------------------------------

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options) : m_s(text), m_opt(options) {}

  Value run() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (m_i != m_s.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(m_i, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    throw JsonError("JSON parse error at offset " + std::to_string(at) + ": " + what, at);
  }

  void skip_ws() {
    while (m_i < m_s.size() &&
           (m_s[m_i] == ' ' || m_s[m_i] == '\t' || m_s[m_i] == '\n' || m_s[m_i] == '\r'))
      ++m_i;
  }

  bool eof() const { return m_i >= m_s.size(); }

  Value parse_value(size_t depth) {
    if (eof()) fail("unexpected end of input, expected a value");
    const char c = m_s[m_i];
    switch (c) {
      case '{':
        return parse_object(depth + 1);
      case '[':
        return parse_array(depth + 1);
      case '"': {
        Value v;
        v.m_type = Type::kString;
        v.m_string = parse_string();
        return v;
      }
      case 't':
        literal("true");
        return Value(true);
      case 'f':
        literal("false");
        return Value(false);
      case 'n':
        literal("null");
        return Value();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        fail(std::string("unexpected character ") + describe(c) + ", expected a value");
    }
  }

  static std::string describe(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
    std::string s = "byte 0x";
    s += kHex[u >> 4];
    s += kHex[u & 0xf];
    return s;
  }

  void literal(std::string_view word) {
    if (m_s.substr(m_i, word.size()) != word)
      fail("invalid literal, expected '" + std::string(word) + "'");
    m_i += word.size();
  }

  void check_depth(size_t depth) {
    if (depth > m_opt.max_depth)
      fail("nesting deeper than " + std::to_string(m_opt.max_depth) + " levels");
  }

  Value parse_object(size_t depth) {
    check_depth(depth);
    Value v;
    v.m_type = Type::kObject;
    ++m_i;  // '{'
    skip_ws();
    if (!eof() && m_s[m_i] == '}') {
      ++m_i;
      return v;
    }
    for (;;) {
      skip_ws();
      if (eof() || m_s[m_i] != '"') fail("expected a string key in an object");
      const size_t key_at = m_i;
      std::string key = parse_string();
      for (const auto& [k, unused] : v.m_object)
        if (k == key) fail_at(key_at, "duplicate key '" + key + "'");
      skip_ws();
      if (eof() || m_s[m_i] != ':') fail("expected ':' after an object key");
      ++m_i;
      skip_ws();
      Value member = parse_value(depth);
      v.m_object.emplace_back(std::move(key), std::move(member));
      skip_ws();
      if (eof()) fail("unexpected end of input inside an object");
      if (m_s[m_i] == ',') {
        ++m_i;
        continue;
      }
      if (m_s[m_i] == '}') {
        ++m_i;
        return v;
      }
      fail("expected ',' or '}' after an object member");
    }
  }

  Value parse_array(size_t depth) {
    check_depth(depth);
    Value v;
    v.m_type = Type::kArray;
    ++m_i;  // '['
    skip_ws();
    if (!eof() && m_s[m_i] == ']') {
      ++m_i;
      return v;
    }
    for (;;) {
      skip_ws();
      v.m_array.push_back(parse_value(depth));
      skip_ws();
      if (eof()) fail("unexpected end of input inside an array");
      if (m_s[m_i] == ',') {
        ++m_i;
        continue;
      }
      if (m_s[m_i] == ']') {
        ++m_i;
        return v;
      }
      fail("expected ',' or ']' after an array element");
    }
  }

  Value parse_number() {
    const size_t start = m_i;
    const auto digit = [&] { return !eof() && m_s[m_i] >= '0' && m_s[m_i] <= '9'; };
    bool integral = true;
    if (m_s[m_i] == '-') ++m_i;
    if (!digit()) fail("expected a digit");
    if (m_s[m_i] == '0') {
      ++m_i;
      if (digit()) fail_at(m_i - 1, "leading zeros are not allowed");
    } else {
      while (digit()) ++m_i;
    }
    if (!eof() && m_s[m_i] == '.') {
      integral = false;
      ++m_i;
      if (!digit()) fail("expected a digit after the decimal point");
      while (digit()) ++m_i;
    }
    if (!eof() && (m_s[m_i] == 'e' || m_s[m_i] == 'E')) {
      integral = false;
      ++m_i;
      if (!eof() && (m_s[m_i] == '+' || m_s[m_i] == '-')) ++m_i;
      if (!digit()) fail("expected a digit in the exponent");
      while (digit()) ++m_i;
    }
    const char* first = m_s.data() + start;
    const char* last = m_s.data() + m_i;
    Value v;
    v.m_type = Type::kNumber;
    if (integral && !(m_i - start == 2 && *first == '-' && first[1] == '0')) {  // keep -0's sign
      int64_t n = 0;
      const auto r = std::from_chars(first, last, n);
      if (r.ec == std::errc() && r.ptr == last) {
        v.m_is_int = true;
        v.m_int = n;
        v.m_number = static_cast<double>(n);
        return v;
      }
    }
    double d = 0;
    const auto r = std::from_chars(first, last, d);
    if (r.ptr != last) fail_at(start, "invalid number");
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow (e.g. 1e999) has no JSON value we could keep; underflow rounds to zero.
      const bool huge = [&] {
        for (const char* p = first; p < last; ++p)
          if (*p == 'e' || *p == 'E') return p + 1 < last && p[1] != '-';
        return true;
      }();
      if (huge) fail_at(start, "number out of range for a double");
      d = 0.0;
      if (*first == '-') d = -0.0;
    }
    v.m_number = d;
    return v;
  }

  unsigned parse_hex4() {
    if (m_i + 4 > m_s.size()) fail("unexpected end of input in a \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = m_s[m_i++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= unsigned(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= unsigned(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= unsigned(c - 'A' + 10);
      } else {
        fail_at(m_i - 1, "invalid hex digit in a \\u escape");
      }
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string parse_string() {
    const size_t start = m_i;
    ++m_i;  // opening quote
    std::string out;
    for (;;) {
      if (eof()) fail_at(start, "unterminated string");
      const unsigned char c = static_cast<unsigned char>(m_s[m_i]);
      if (c == '"') {
        ++m_i;
        return out;
      }
      if (c < 0x20) fail("control character " + describe(char(c)) + " in a string must be escaped");
      if (c >= 0x80) {
        size_t bad = 0;
        const size_t n = utf8_sequence(m_s, m_i, &bad);
        if (!n) fail("invalid UTF-8 in a string");
        out.append(m_s.data() + m_i, n);
        m_i += n;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++m_i;
        continue;
      }
      const size_t esc_at = m_i;
      ++m_i;
      if (eof()) fail_at(start, "unterminated string");
      const char e = m_s[m_i++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = parse_hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) {
            fail_at(esc_at, "unpaired low surrogate in a \\u escape");
          } else if (cp >= 0xd800 && cp <= 0xdbff) {
            if (m_s.substr(m_i, 2) != "\\u")
              fail_at(esc_at, "unpaired high surrogate in a \\u escape");
            m_i += 2;
            const unsigned lo = parse_hex4();
            if (lo < 0xdc00 || lo > 0xdfff)
              fail_at(esc_at, "unpaired high surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail_at(esc_at, std::string("invalid escape \\") + describe(e));
      }
    }
  }

  std::string_view m_s;
  ParseOptions m_opt;
  size_t m_i = 0;
};

Value parse(std::string_view text, const ParseOptions& options) {
  return Parser(text, options).run();
}

void write(Writer& w, const Value& v) {
  switch (v.type()) {
    case Type::kNull:
      w.null();
      break;
    case Type::kBool:
      w.value(v.as_bool());
      break;
    case Type::kNumber:
      if (v.is_integer()) {
        w.value(static_cast<long long>(v.as_int()));
      } else {
        w.value(v.as_number());
      }
      break;
    case Type::kString:
      w.value(v.as_string());
      break;
    case Type::kArray:
      w.begin_array();
      for (const Value& x : v.as_array()) write(w, x);
      w.end_array();
      break;
    case Type::kObject:
      w.begin_object();
      for (const auto& [k, x] : v.as_object()) {
        w.key(k);
        write(w, x);
      }
      w.end_object();
      break;
  }
}

std::string dump(const Value& v, int indent) {
  Writer w(indent);
  write(w, v);
  return w.str();
}

}  // namespace sinkscope::json
