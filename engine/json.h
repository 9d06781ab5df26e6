// SPDX-License-Identifier: Apache-2.0
// Small JSON support for CLI output, golden manifests and tests:
//  - Writer: streaming writer (objects, arrays, scalars). Strings are fully escaped; invalid
//    UTF-8 becomes U+FFFD; doubles print in the shortest form that reads back to the same
//    value; NaN and infinities print as null (JSON has no spelling for them).
//  - Value + parse(): a DOM parser (RFC 8259). Errors are JsonError with the byte offset.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sinkscope::json {

class JsonError : public std::runtime_error {
 public:
  JsonError(const std::string& what, size_t offset) : std::runtime_error(what), m_offset(offset) {}
  size_t offset() const { return m_offset; }  // byte offset into the parsed text (parse errors)

 private:
  size_t m_offset;
};

// `s` as a quoted JSON string literal.
std::string quote(std::string_view s);
// Shortest round-trippable text for a finite double ("null" for NaN / +-inf).
std::string format_number(double v);

class Writer {
 public:
  // indent 0: compact, one line; indent > 0: pretty-printed with that many spaces per level.
  explicit Writer(int indent = 0) : m_indent(indent) {}

  Writer& begin_object();
  Writer& end_object();
  Writer& begin_array();
  Writer& end_array();
  Writer& key(std::string_view k);  // inside an object, before each value

  Writer& value(std::string_view s);
  Writer& value(const char* s) { return value(std::string_view(s)); }
  Writer& value(const std::string& s) { return value(std::string_view(s)); }
  Writer& value(bool b);
  Writer& value(int v) { return write_signed(v); }
  Writer& value(long v) { return write_signed(v); }
  Writer& value(long long v) { return write_signed(v); }
  Writer& value(unsigned v) { return write_unsigned(v); }
  Writer& value(unsigned long v) { return write_unsigned(v); }
  Writer& value(unsigned long long v) { return write_unsigned(v); }
  Writer& value(double v);
  Writer& value(float v) { return value(static_cast<double>(v)); }
  Writer& null();

  // key + value in one call.
  template <typename T>
  Writer& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  template <typename T>
  Writer& field(std::string_view k, const std::vector<T>& v) {
    key(k);
    begin_array();
    for (const auto& x : v) value(x);
    return end_array();
  }

  // The text so far; complete() tells whether every container has been closed.
  const std::string& str() const { return m_out; }
  bool complete() const { return m_stack.empty() && m_has_root; }

 private:
  Writer& write_signed(int64_t v);
  Writer& write_unsigned(uint64_t v);
  Writer& raw(std::string_view text);  // one scalar value, already formatted
  void before_value();
  void newline_indent(size_t depth);
  struct Level {
    bool object;
    bool empty = true;
    bool key_pending = false;
  };
  int m_indent;
  std::string m_out;
  std::vector<Level> m_stack;
  bool m_has_root = false;
};

enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
const char* type_name(Type t);

class Value {
 public:
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;  // file order; keys unique

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : m_type(Type::kBool), m_bool(b) {}
  Value(double d) : m_type(Type::kNumber), m_number(d) {}
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v);
  Value(std::string s) : m_type(Type::kString), m_string(std::move(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(Array a) : m_type(Type::kArray), m_array(std::move(a)) {}
  Value(Object o) : m_type(Type::kObject), m_object(std::move(o)) {}

  Type type() const { return m_type; }
  bool is_null() const { return m_type == Type::kNull; }
  bool is_bool() const { return m_type == Type::kBool; }
  bool is_number() const { return m_type == Type::kNumber; }
  bool is_string() const { return m_type == Type::kString; }
  bool is_array() const { return m_type == Type::kArray; }
  bool is_object() const { return m_type == Type::kObject; }
  // True when the number was written as an integer that fits int64 (exact in as_int()).
  bool is_integer() const { return m_type == Type::kNumber && m_is_int; }

  // Typed access; throws JsonError ("expected a number, got a string") on a type mismatch.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;  // integers exactly; other numbers only when integral and in range
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& as_array();
  Object& as_object();

  // Object member by key; nullptr when absent (or not an object).
  const Value* find(std::string_view key) const;
  // Object member by key; throws JsonError naming the key when absent.
  const Value& operator[](std::string_view key) const;
  // Array element; throws JsonError when out of range.
  const Value& operator[](size_t index) const;
  size_t size() const;  // elements of an array or members of an object; 0 otherwise

  // Appends (or replaces) an object member; turns a null into an object.
  Value& set(std::string key, Value v);
  // Appends to an array; turns a null into an array.
  Value& push_back(Value v);

  bool operator==(const Value& other) const;

 private:
  friend class Parser;
  Type m_type = Type::kNull;
  bool m_bool = false;
  bool m_is_int = false;
  double m_number = 0;
  int64_t m_int = 0;
  std::string m_string;
  Array m_array;
  Object m_object;
};

struct ParseOptions {
  size_t max_depth = 256;  // nesting limit, so hostile input cannot exhaust the stack
};

// Parses one JSON text (surrounding whitespace allowed). Throws JsonError with the offset of the
// problem: "offset 17: expected ',' or '}' after an object member".
Value parse(std::string_view text, const ParseOptions& options = {});

// Serializes a DOM value.
void write(Writer& w, const Value& v);
std::string dump(const Value& v, int indent = 0);

}  // namespace sinkscope::json
