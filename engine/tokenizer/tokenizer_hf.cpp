// SPDX-License-Identifier: Apache-2.0
// Tokenizer from a Hugging Face tokenizer.json: the byte-level BPE kinds the engine implements
// (engine/tokenizer/tokenizer_bpe.cpp), recognised from the pre-tokenizer as written in the file. Anything
// else is refused with the kind named, never approximated.
#include <algorithm>
#include <map>

#include "engine/util/json_io.h"
#include "engine/tokenizer/tokenizer_internal.h"

namespace sinkscope {
namespace tokenizer_detail {
namespace {

using unicode::PreSplit;

// The pre-tokenizer regexes as the families' tokenizer.json files spell them.
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class Reader {
 public:
  explicit Reader(std::string file) : m_file(std::move(file)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw TokenizerError(m_file + ": " + what);
  }
  Json parse(const std::string& text) const {
    try {
      return Json::parse(text);
    } catch (const Json::exception& e) {
      fail(std::string("not valid JSON: ") + e.what());
    }
  }
  const std::string& file() const { return m_file; }

 private:
  std::string m_file;
};

std::string type_of(const Json& j) {
  if (j.is_object()) {
    auto it = j.find("type");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
    return "(object without a type)";
  }
  return j.is_null() ? "null" : "(not an object)";
}

// j[key] when it is a string, else "".
std::string text_of(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool flag(const Json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A ByteLevel pre-tokenizer step as the byte-level BPE families write it; `regex` is whether it
// splits with GPT-2's regex itself.
bool is_byte_level(const Json& j, bool regex) {
  return type_of(j) == "ByteLevel" && !flag(j, "add_prefix_space", false) &&
         flag(j, "use_regex", true) == regex;
}

PreSplit read_pre_tokenizer(const Reader& r, const Json& pre) {
  const std::string type = type_of(pre);
  auto unsupported = [&](const std::string& what) {
    r.fail("pre_tokenizer " + what +
           " is not supported (byte-level BPE only: ByteLevel, Digits + ByteLevel, or Split with "
           "the GPT-2, Qwen2 or Llama 3 regex + ByteLevel)");
  };
  if (is_byte_level(pre, true)) return PreSplit::kGpt2;
  if (type != "Sequence") unsupported(type);
  const Json* steps = nullptr;
  if (auto it = pre.find("pretokenizers"); it != pre.end() && it->is_array()) steps = &*it;
  if (!steps || steps->size() != 2)
    unsupported("Sequence of " + std::to_string(steps ? steps->size() : 0) + " steps");
  const Json& a = (*steps)[0];
  const Json& b = (*steps)[1];
  if (type_of(a) == "Digits" && flag(a, "individual_digits", false) && is_byte_level(b, true))
    return PreSplit::kSmolLM;
  if (type_of(a) == "Split" && is_byte_level(b, false)) {
    const std::string behavior = text_of(a, "behavior");
    if (behavior != "Isolated" || flag(a, "invert", false))
      unsupported("Split with behavior '" + behavior + "'");
    std::string regex;
    if (auto p = a.find("pattern"); p != a.end() && p->is_object()) {
      if (auto re = p->find("Regex"); re != p->end() && re->is_string())
        regex = re->get<std::string>();
    }
    if (regex == kQwen2Regex) return PreSplit::kQwen2;
    if (regex == kLlama3Regex) return PreSplit::kLlama3;
    if (regex == kGpt2Regex) return PreSplit::kGpt2;
    unsupported("Split with the regex '" + regex.substr(0, 120) + "'");
  }
  unsupported("Sequence [" + type_of(a) + ", " + type_of(b) + "]");
  return PreSplit::kGpt2;  // not reached: unsupported() throws
}

// True when the file describes SentencePiece-style BPE (byte fallback, Metaspace, or a
// normalizer that writes U+2581) rather than byte-level BPE.
bool is_spm_style(const Json& j, const Json& model) {
  const Json norm = j.value("normalizer", Json()), pre = j.value("pre_tokenizer", Json());
  if (flag(model, "byte_fallback", false) || type_of(pre) == "Metaspace") return true;
  const std::string nt = type_of(norm);
  return nt == "Replace" || nt == "Prepend" || (nt == "Sequence" && norm.contains("normalizers"));
}

// The SentencePiece-style settings, each step as written (anything else named and refused).
HfSpmSettings read_spm_style(const Reader& r, const Json& j, const Json& model) {
  constexpr std::string_view kMarker = "\xE2\x96\x81";
  HfSpmSettings st;
  st.prepend = HfSpmSettings::Prepend::kNever;
  st.byte_fallback = flag(model, "byte_fallback", false);
  st.fuse_unk = flag(model, "fuse_unk", false);
  bool replaces = false;
  const Json norm = j.value("normalizer", Json());
  std::vector<Json> steps;
  if (type_of(norm) == "Sequence") {
    for (const Json& n : norm.value("normalizers", Json::array())) steps.push_back(n);
  } else if (!norm.is_null()) {
    steps.push_back(norm);
  }
  for (const Json& n : steps) {
    const std::string t = type_of(n);
    if (t == "NFC" && !replaces && st.prepend == HfSpmSettings::Prepend::kNever) {
      st.nfc = true;
    } else if (t == "Prepend" && text_of(n, "prepend") == kMarker) {
      st.prepend = HfSpmSettings::Prepend::kAlways;
    } else if (t == "Replace" && n.contains("pattern") && n["pattern"].is_object() &&
               text_of(n["pattern"], "String") == " " && text_of(n, "content") == kMarker) {
      replaces = true;
    } else {
      r.fail("normalizer " + t +
             " is not supported in a SentencePiece-style tokenizer (Prepend U+2581, Replace ' ' "
             "with U+2581, or a Sequence of them)");
    }
  }
  const Json pre = j.value("pre_tokenizer", Json());
  if (type_of(pre) == "Metaspace") {
    if (pre.contains("replacement") && text_of(pre, "replacement") != kMarker)  // default U+2581
      r.fail("pre_tokenizer Metaspace with a replacement other than U+2581 is not supported");
    std::string scheme = text_of(pre, "prepend_scheme");
    if (scheme.empty()) scheme = flag(pre, "add_prefix_space", true) ? "always" : "never";
    if (scheme == "always") st.prepend = HfSpmSettings::Prepend::kAlways;
    else if (scheme == "first") st.prepend = HfSpmSettings::Prepend::kFirst;
    else if (scheme != "never")
      r.fail("pre_tokenizer Metaspace prepend_scheme '" + scheme + "' is not supported");
    st.split = flag(pre, "split", true);
    st.prepend_unless_space = true;
    replaces = true;
  } else if (!pre.is_null()) {
    r.fail("pre_tokenizer " + type_of(pre) +
           " is not supported in a SentencePiece-style tokenizer (none or Metaspace)");
  }
  if (!replaces)
    r.fail("a SentencePiece-style tokenizer without Replace ' ' -> U+2581 or Metaspace is not "
           "supported");
  // Decoding drops the first token's leading space where encoding added it: a Strip decoder
  // step (Llama 2) or a Metaspace decoder that prepends.
  st.strip_first_space = false;
  const Json dec = j.value("decoder", Json());
  std::vector<Json> dsteps;
  if (type_of(dec) == "Sequence") {
    for (const Json& d : dec.value("decoders", Json::array())) dsteps.push_back(d);
  } else if (!dec.is_null()) {
    dsteps.push_back(dec);
  }
  for (const Json& d : dsteps) {
    const std::string t = type_of(d);
    if (t == "Strip" && d.value("start", 0) >= 1) st.strip_first_space = true;
    if (t == "Metaspace")
      st.strip_first_space = text_of(d, "prepend_scheme") != "never" &&
                             flag(d, "add_prefix_space", true);
    if (t != "Strip" && t != "Metaspace" && t != "Replace" && t != "ByteFallback" && t != "Fuse")
      r.fail("decoder " + t + " is not supported in a SentencePiece-style tokenizer");
  }
  return st;
}

// A token named in tokenizer_config.json: a string or {"content": ...}; "" when absent or null.
std::string token_text(const Json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return {};
}

// Ids in a config's "<key>": an integer or a list of integers.
std::vector<TokenId> id_list(const Json& cfg, const char* key) {
  std::vector<TokenId> out;
  auto it = cfg.find(key);
  if (it == cfg.end()) return out;
  auto one = [&](const Json& v) {
    if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t(1) << 30))
      out.push_back(TokenId(v.get<int64_t>()));
  };
  if (it->is_array()) {
    for (const Json& v : *it) one(v);
  } else {
    one(*it);
  }
  return out;
}

std::unique_ptr<Tokenizer> tokenizer_from_hf(const HfTokenizerFiles& files) {
  const std::string dir = files.source.empty() ? std::string(".") : files.source;
  const Reader r(dir + "/tokenizer.json");
  const Json j = r.parse(files.tokenizer_json);
  if (!j.is_object()) r.fail("not a JSON object");

  const Json model = j.value("model", Json());
  const std::string model_type = type_of(model);
  if (model_type != "BPE")
    r.fail("model type " + model_type +
           " is not supported (BPE only: byte-level, or SentencePiece-style with byte_fallback)");
  const bool spm = is_spm_style(j, model);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty())
      r.fail(std::string("BPE ") + key + " '" + it->get<std::string>() + "' is not supported");
  }
  HfSpmSettings spm_settings;
  BpeSettings settings;
  if (spm) {
    spm_settings = read_spm_style(r, j, model);
  } else {
    const Json normalizer = j.value("normalizer", Json());
    if (!normalizer.is_null() && type_of(normalizer) != "NFC")
      r.fail("normalizer " + type_of(normalizer) + " is not supported (none or NFC)");
    settings.nfc = type_of(normalizer) == "NFC";
    const Json decoder = j.value("decoder", Json());
    if (!decoder.is_null() && type_of(decoder) != "ByteLevel")
      r.fail("decoder " + type_of(decoder) + " is not supported (ByteLevel)");
    settings.split = read_pre_tokenizer(r, j.value("pre_tokenizer", Json()));
  }
  settings.ignore_merges = flag(model, "ignore_merges", false);
  if (spm && settings.ignore_merges)
    r.fail("ignore_merges in a SentencePiece-style tokenizer is not supported");

  // Vocabulary: model.vocab (text -> id) and added_tokens (id, content, special).
  auto vit = model.find("vocab");
  if (vit == model.end() || !vit->is_object() || vit->empty())
    r.fail("model.vocab is missing or empty");
  constexpr int64_t kMaxVocab = int64_t(1) << 24;
  std::map<int64_t, std::pair<std::string, int32_t>> by_id;
  for (const auto& [text, id] : vit->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab)
      r.fail("model.vocab entry '" + text.substr(0, 60) + "' has no valid id");
    if (!by_id.emplace(id.get<int64_t>(), std::make_pair(text, int32_t(kNormal))).second)
      r.fail("model.vocab id " + std::to_string(id.get<int64_t>()) + " is used twice");
  }
  if (auto at = j.find("added_tokens"); at != j.end() && at->is_array()) {
    for (const Json& t : *at) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string())
        r.fail("an added_tokens entry has no integer id or string content");
      const int64_t id = t["id"].get<int64_t>();
      if (id < 0 || id >= kMaxVocab)
        r.fail("added token id " + std::to_string(id) + " is out of range");
      const int32_t type = flag(t, "special", false) ? kControl : kUserDefined;
      by_id[id] = {t["content"].get<std::string>(), type};
    }
  }
  Vocab v;
  const size_t n = size_t(by_id.rbegin()->first) + 1;
  v.tokens.assign(n, std::string());
  v.types.assign(n, kUnused);  // ids no entry names stay empty and unused
  for (auto& [id, entry] : by_id) {
    v.tokens[size_t(id)] = std::move(entry.first);
    v.types[size_t(id)] = entry.second;
  }

  auto mit = model.find("merges");
  if (mit == model.end() || !mit->is_array() || mit->empty())
    r.fail("model.merges is missing or empty (needed by byte-level BPE)");
  settings.merges.reserve(mit->size());
  for (size_t rank = 0; rank < mit->size(); ++rank) {
    const Json& m = (*mit)[rank];
    if (m.is_string()) {
      // "left right": byte-level tokens contain no spaces.
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos)
        r.fail("model.merges[" + std::to_string(rank) + "] = '" + s.substr(0, 60) +
               "' is not 'left right'");
      settings.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      settings.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      r.fail("model.merges[" + std::to_string(rank) + "] is neither 'left right' nor a pair");
    }
  }

  // bos / eos / add_bos / chat template.
  Json cfg = Json::object(), model_cfg = Json::object(), gen_cfg = Json::object();
  if (!files.tokenizer_config_json.empty()) {
    cfg = Reader(dir + "/tokenizer_config.json").parse(files.tokenizer_config_json);
    if (!cfg.is_object()) r.fail("tokenizer_config.json is not a JSON object");
  }
  if (!files.config_json.empty()) {
    model_cfg = Reader(dir + "/config.json").parse(files.config_json);
    if (!model_cfg.is_object()) model_cfg = Json::object();
  }
  if (!files.generation_config_json.empty()) {
    gen_cfg = Reader(dir + "/generation_config.json").parse(files.generation_config_json);
    if (!gen_cfg.is_object()) gen_cfg = Json::object();
  }
  finish_vocab(v, {});
  auto id_of = [&](const std::string& text) -> TokenId {
    if (text.empty()) return -1;
    auto it = v.ids.find(text);
    if (it == v.ids.end())
      Reader(dir + "/tokenizer_config.json")
          .fail("token '" + text.substr(0, 60) + "' is not in the vocabulary");
    return it->second;
  };
  auto first_valid = [&](const std::vector<TokenId>& ids) -> TokenId {
    for (TokenId id : ids)
      if (size_t(id) < n) return id;
    return -1;
  };
  v.bos = id_of(token_text(cfg, "bos_token"));
  if (v.bos < 0 && !cfg.contains("bos_token"))
    v.bos = first_valid(id_list(model_cfg, "bos_token_id"));
  v.eos = id_of(token_text(cfg, "eos_token"));
  if (v.eos < 0 && !cfg.contains("eos_token"))
    v.eos = first_valid(id_list(model_cfg, "eos_token_id"));
  v.unk = id_of(token_text(cfg, "unk_token"));
  if (v.unk < 0) v.unk = id_of(text_of(model, "unk_token"));

  // add_bos: tokenizer_config.json's flag, else whether the post-processor's single-sequence
  // template starts with a special token (Llama 3's TemplateProcessing adds <|begin_of_text|>).
  if (auto it = cfg.find("add_bos_token"); it != cfg.end() && it->is_boolean()) {
    v.add_bos = it->get<bool>();
  } else if (const Json pp = j.value("post_processor", Json());
             type_of(pp) == "TemplateProcessing") {
    const Json single = pp.value("single", Json());
    if (single.is_array() && !single.empty() && single[0].is_object() &&
        single[0].contains("SpecialToken")) {
      const Json st = single[0]["SpecialToken"];
      if (st.is_object() && st.contains("id") && st["id"].is_string()) {
        auto it2 = v.ids.find(st["id"].get<std::string>());
        if (it2 != v.ids.end()) {
          v.add_bos = true;
          if (v.bos < 0) v.bos = it2->second;
        }
      }
    }
  }

  if (auto it = cfg.find("chat_template"); it != cfg.end()) {
    if (it->is_string()) {
      v.chat_template = it->get<std::string>();
    } else if (it->is_array()) {  // named templates: the default one
      for (const Json& t : *it)
        if (t.is_object() && text_of(t, "name") == "default" && t.contains("template") &&
            t["template"].is_string())
          v.chat_template = t["template"].get<std::string>();
    }
  }
  if (v.chat_template.empty()) v.chat_template = files.chat_template;

  std::vector<TokenId> extra = id_list(gen_cfg, "eos_token_id");
  for (TokenId id : id_list(model_cfg, "eos_token_id")) extra.push_back(id);
  finish_vocab(v, extra);
  if (spm) {
    spm_settings.merges = std::move(settings.merges);
    return make_hf_spm_tokenizer(std::move(v), std::move(spm_settings));
  }
  return make_bpe_tokenizer(std::move(v), std::move(settings));
}

}  // namespace
}  // namespace tokenizer_detail

std::unique_ptr<Tokenizer> Tokenizer::from_hf(const HfTokenizerFiles& files) {
  try {
    return tokenizer_detail::tokenizer_from_hf(files);
  } catch (const Json::exception& e) {
    // A value of an unexpected JSON type that no check above anticipated.
    throw TokenizerError((files.source.empty() ? std::string(".") : files.source) +
                         "/tokenizer.json: unexpected content: " + e.what());
  }
}

}  // namespace sinkscope
