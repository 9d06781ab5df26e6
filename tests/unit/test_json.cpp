// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "engine/json.h"

namespace json = sinkscope::json;

namespace {

// Parses and returns the error offset, or -1 when the text parsed.
long long error_offset(std::string_view text) {
  try {
    json::parse(text);
  } catch (const json::JsonError& e) {
    return static_cast<long long>(e.offset());
  }
  return -1;
}

}  // namespace

TEST(JsonWriter, CompactObjectsAndArrays) {
  json::Writer w;
  w.begin_object()
      .field("a", 1)
      .field("b", "x")
      .field("c", true)
      .key("d")
      .null()
      .key("e")
      .begin_array()
      .value(1.5)
      .begin_object()
      .end_object()
      .begin_array()
      .end_array()
      .end_array()
      .end_object();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(w.str(), R"({"a":1,"b":"x","c":true,"d":null,"e":[1.5,{},[]]})");
}

TEST(JsonWriter, PrettyPrintParsesBack) {
  json::Writer w(2);
  w.begin_object().field("ids", std::vector<int>{1, 2, 3}).field("name", "n").end_object();
  EXPECT_NE(w.str().find("\n  \"ids\": [\n    1,"), std::string::npos) << w.str();
  const json::Value v = json::parse(w.str());
  EXPECT_EQ(v["ids"].size(), 3u);
  EXPECT_EQ(v["ids"][2].as_int(), 3);
  EXPECT_EQ(v["name"].as_string(), "n");
}

TEST(JsonWriter, MisuseThrows) {
  {
    json::Writer w;
    w.begin_object();
    EXPECT_THROW(w.value(1), std::logic_error);  // value without a key
  }
  {
    json::Writer w;
    w.begin_array();
    EXPECT_THROW(w.key("k"), std::logic_error);
    EXPECT_THROW(w.end_object(), std::logic_error);
  }
  {
    json::Writer w;
    w.value(1);
    EXPECT_THROW(w.value(2), std::logic_error);  // two roots
  }
  {
    json::Writer w;
    w.begin_object().key("k");
    EXPECT_THROW(w.end_object(), std::logic_error);
    EXPECT_FALSE(w.complete());
  }
}

TEST(JsonWriter, EscapesEveryControlCharacter) {
  std::string all;
  for (int c = 0; c < 0x20; ++c) all += static_cast<char>(c);
  all += "\"\\/\x7f";
  const std::string q = json::quote(all);
  EXPECT_EQ(q.substr(0, 7), "\"\\u0000");
  EXPECT_NE(q.find("\\b\\t\\n\\u000b\\f\\r"), std::string::npos) << q;
  EXPECT_NE(q.find("\\u001f\\\"\\\\/\\u007f\""), std::string::npos) << q;
  for (char c : q) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
  EXPECT_EQ(json::parse(q).as_string(), all);
}

TEST(JsonWriter, ValidUtf8PassesThrough) {
  const std::string s = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf";
  EXPECT_EQ(json::quote(s), "\"" + s + "\"");
  EXPECT_EQ(json::parse(json::quote(s)).as_string(), s);
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacter) {
  const std::string r = "\\ufffd";
  EXPECT_EQ(json::quote("a\xff"
                        "b"),
            "\"a" + r + "b\"");
  EXPECT_EQ(json::quote("\x80"), "\"" + r + "\"");                          // lone continuation
  EXPECT_EQ(json::quote("\xc0\xaf"), "\"" + r + r + "\"");                  // overlong '/'
  EXPECT_EQ(json::quote("\xed\xa0\x80"), "\"" + r + r + r + "\"");          // UTF-16 surrogate
  EXPECT_EQ(json::quote("\xf4\x90\x80\x80"), "\"" + r + r + r + r + "\"");  // > U+10FFFF
  // A truncated sequence is one maximal subpart: one replacement, then the next character.
  EXPECT_EQ(json::quote("\xe2\x82"
                        "x"),
            "\"" + r + "x\"");
  EXPECT_EQ(json::quote("\xf0\x9f\x98"), "\"" + r + "\"");
  // The output is always parseable and valid UTF-8, whatever the input.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string junk;
    for (int i = 0; i < 40; ++i) junk += static_cast<char>(rng() & 0xff);
    const std::string q = json::quote(junk);
    ASSERT_NO_THROW(json::parse(q)) << q;
  }
}

TEST(JsonWriter, NumbersRoundTrip) {
  const double values[] = {0.0,
                           -0.0,
                           1.0,
                           0.1,
                           1.0 / 3.0,
                           -2.5e-300,
                           1.7976931348623157e308,
                           std::numeric_limits<double>::denorm_min(),
                           123456789.123456789,
                           static_cast<double>(0.1f)};
  for (double v : values) {
    const std::string s = json::format_number(v);
    const double back = json::parse(s).as_number();
    EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << s;
  }
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    const double back = json::parse(json::format_number(v)).as_number();
    ASSERT_EQ(back, v) << json::format_number(v);
  }
  EXPECT_EQ(json::format_number(0.1), "0.1");
  EXPECT_EQ(json::format_number(2.0), "2");
}

TEST(JsonWriter, NonFiniteIsNull) {
  json::Writer w;
  w.begin_array()
      .value(std::nan(""))
      .value(std::numeric_limits<double>::infinity())
      .value(-std::numeric_limits<double>::infinity())
      .value(std::numeric_limits<float>::quiet_NaN())
      .end_array();
  EXPECT_EQ(w.str(), "[null,null,null,null]");
}

TEST(JsonWriter, IntegerExtremes) {
  json::Writer w;
  w.begin_array()
      .value(std::numeric_limits<long long>::min())
      .value(std::numeric_limits<unsigned long long>::max())
      .end_array();
  EXPECT_EQ(w.str(), "[-9223372036854775808,18446744073709551615]");
  const json::Value v = json::parse(w.str());
  EXPECT_TRUE(v[0].is_integer());
  EXPECT_EQ(v[0].as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(v[1].is_integer());  // beyond int64: kept as a double
  EXPECT_THROW(v[1].as_int(), json::JsonError);
}

TEST(JsonParse, Document) {
  const json::Value v = json::parse(R"(
    {"name": "golden", "n": 3, "x": -1.25e2, "ok": true, "no": false, "nothing": null,
     "ids": [1, 2, 3], "nested": {"a": [[], {}]}, "s": "tab\tq\"\u00e9\ud83d\ude00/"}  )");
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.size(), 9u);
  EXPECT_EQ(v["name"].as_string(), "golden");
  EXPECT_EQ(v["n"].as_int(), 3);
  EXPECT_TRUE(v["n"].is_integer());
  EXPECT_DOUBLE_EQ(v["x"].as_number(), -125.0);
  EXPECT_FALSE(v["x"].is_integer());
  EXPECT_EQ(v["x"].as_int(), -125);  // integral double converts exactly
  EXPECT_TRUE(v["ok"].as_bool());
  EXPECT_FALSE(v["no"].as_bool());
  EXPECT_TRUE(v["nothing"].is_null());
  EXPECT_EQ(v["ids"][1].as_int(), 2);
  EXPECT_TRUE(v["nested"]["a"][0].is_array());
  EXPECT_TRUE(v["nested"]["a"][1].is_object());
  EXPECT_EQ(v["s"].as_string(), "tab\tq\"\xc3\xa9\xf0\x9f\x98\x80/");
  EXPECT_EQ(v.as_object()[0].first, "name");  // file order kept
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_THROW(v["missing"], json::JsonError);
  EXPECT_THROW(v["ids"][3], json::JsonError);
  EXPECT_THROW(v["name"].as_number(), json::JsonError);
  EXPECT_THROW(v["x"].as_string(), json::JsonError);
  EXPECT_THROW(json::parse("1.5").as_int(), json::JsonError);
}

TEST(JsonParse, Scalars) {
  EXPECT_TRUE(json::parse("null").is_null());
  EXPECT_EQ(json::parse(" 0 ").as_int(), 0);
  EXPECT_EQ(json::parse("-0").as_number(), 0.0);
  EXPECT_TRUE(std::signbit(json::parse("-0.0").as_number()));
  EXPECT_EQ(json::parse("\"\"").as_string(), "");
  EXPECT_DOUBLE_EQ(json::parse("1E+2").as_number(), 100.0);
  EXPECT_EQ(json::parse("1e-400").as_number(), 0.0);  // underflow rounds to zero
}

TEST(JsonParse, ErrorsReportOffsets) {
  EXPECT_EQ(error_offset(""), 0);
  EXPECT_EQ(error_offset("   "), 3);
  EXPECT_EQ(error_offset("{\"a\" 1}"), 5);
  EXPECT_EQ(error_offset("{\"a\":1,}"), 7);
  EXPECT_EQ(error_offset("[1,2"), 4);
  EXPECT_EQ(error_offset("[1 2]"), 3);
  EXPECT_EQ(error_offset("tru"), 0);
  EXPECT_EQ(error_offset("01"), 0);
  EXPECT_EQ(error_offset("1."), 2);
  EXPECT_EQ(error_offset("-"), 1);
  EXPECT_EQ(error_offset("1e"), 2);
  EXPECT_EQ(error_offset("+1"), 0);
  EXPECT_EQ(error_offset("NaN"), 0);
  EXPECT_EQ(error_offset("1e999"), 0);
  EXPECT_EQ(error_offset("\"abc"), 0);
  EXPECT_EQ(error_offset("\"a\x01\""), 2);
  EXPECT_EQ(error_offset("\"\\x\""), 1);
  EXPECT_EQ(error_offset("\"\\u12G4\""), 5);
  EXPECT_EQ(error_offset("\"\\ud800\""), 1);
  EXPECT_EQ(error_offset("\"\\udc00\""), 1);
  EXPECT_EQ(error_offset("\"\xff\""), 1);
  EXPECT_EQ(error_offset("{\"a\":1,\"a\":2}"), 7);  // duplicate key
  EXPECT_EQ(error_offset("{} x"), 3);
  EXPECT_EQ(error_offset("{1:2}"), 1);
  EXPECT_EQ(error_offset("[1,]"), 3);
  try {
    json::parse("[true, fals]");
    FAIL();
  } catch (const json::JsonError& e) {
    EXPECT_NE(std::string(e.what()).find("offset 7"), std::string::npos) << e.what();
  }
}

TEST(JsonParse, DepthLimit) {
  const std::string deep(100000, '[');
  EXPECT_THROW(json::parse(deep), json::JsonError);
  const std::string ok = std::string(50, '[') + std::string(50, ']');
  EXPECT_NO_THROW(json::parse(ok));
  json::ParseOptions tight;
  tight.max_depth = 10;
  EXPECT_THROW(json::parse(ok, tight), json::JsonError);
}

TEST(JsonDom, BuildDumpParseRoundTrip) {
  json::Value v;
  v.set("ids", json::Value::Array{json::Value(1), json::Value(2)});
  v.set("pi", 3.141592653589793);
  v.set("text", "line\nbreak");
  v.set("flag", false);
  v.set("none", nullptr);
  json::Value& arr = v.set("list", json::Value());
  arr.push_back(json::Value("a"));
  arr.push_back(json::Value(-7));
  v.set("pi", 3.0);  // replace keeps the position
  EXPECT_EQ(v.as_object()[1].first, "pi");
  for (int indent : {0, 1, 4}) {
    const json::Value back = json::parse(json::dump(v, indent));
    EXPECT_EQ(back, v) << json::dump(v, indent);
  }
  EXPECT_EQ(
      json::dump(v),
      R"({"ids":[1,2],"pi":3,"text":"line\nbreak","flag":false,"none":null,"list":["a",-7]})");
}
