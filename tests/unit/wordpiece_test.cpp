// WordPiece tokenization as BERT's uncased tokenizer behaves, on a small vocabulary whose
// expected pieces are worked out by hand from the BertTokenizer algorithm, and compared with
// Hugging Face's tokenizers library itself (its Node binding, installed by
// scripts/install-npm.sh) on texts that probe the edges.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/text/wordpiece.h"
#include "npm_peers.h"

namespace rlx::text {
namespace {

WordPieceTokenizer make(WordPieceOptions o = {}) {
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "un", "##aff", "##able",
                                    ",", "!", "the", "cafe", "中", "国", "a", "##b", "naive", ".", "'", "s"};
  auto t = WordPieceTokenizer::from_tokens(vocab, o);
  EXPECT_TRUE(t.has_value()) << t.status().to_string();
  return *t;
}

using V = std::vector<std::string>;

TEST(WordPiece, LowercasesStripsAccentsAndSplitsPunctuation) {
  auto t = make();
  EXPECT_EQ(t.tokenize("Hello, WORLD!"), (V{"hello", ",", "world", "!"}));
  EXPECT_EQ(t.tokenize("  Café\tnaïve\n"), (V{"cafe", "naive"}));
  EXPECT_EQ(t.tokenize("unaffable"), (V{"un", "##aff", "##able"}));
  EXPECT_EQ(t.tokenize("the world's"), (V{"the", "world", "'", "s"}));
}

TEST(WordPiece, CjkIsSplitPerCharacterAndUnknownsMap) {
  auto t = make();
  EXPECT_EQ(t.tokenize("中国"), (V{"中", "国"}));
  EXPECT_EQ(t.tokenize("zzz"), (V{"[UNK]"}));
  EXPECT_EQ(t.tokenize("abb"), (V{"a", "##b", "##b"}));
  EXPECT_EQ(t.tokenize("abz"), (V{"[UNK]"}));  // no piece covers "z": the whole word is unknown
}

TEST(WordPiece, ControlCharactersAndLongWords) {
  auto t = make();
  EXPECT_EQ(t.tokenize(std::string("hel") + '\x01' + "lo"), (V{"hello"}));
  EXPECT_EQ(t.tokenize(std::string(150, 'a')), (V{"[UNK]"}));
  EXPECT_TRUE(t.tokenize("").empty());
  EXPECT_TRUE(t.tokenize("\xff\xfe").empty());  // invalid UTF-8 is dropped like U+FFFD
}

// As Hugging Face's tokenizers do: special tokens typed in the text are those tokens (matched
// as written, before lowercasing), private-use and unassigned characters are dropped, and
// U+2028 / U+2029 (Unicode White_Space) separate words.
TEST(WordPiece, SpecialTokensInTextAndUnicodeSeparators) {
  auto t = make();
  EXPECT_EQ(t.tokenize("hello [SEP] world"), (V{"hello", "[SEP]", "world"}));
  EXPECT_EQ(t.tokenize("hello[SEP]world[CLS]"), (V{"hello", "[SEP]", "world", "[CLS]"}));
  EXPECT_EQ(t.tokenize("[sep]"), (V{"[UNK]", "[UNK]", "[UNK]"}));  // "[", "sep", "]": not the token
  EXPECT_EQ(t.tokenize("hel\xee\x80\x80lo"), (V{"hello"}));        // U+E000, private use
  EXPECT_EQ(t.tokenize("hello\xe2\x80\xa8world"), (V{"hello", "world"}));  // U+2028
  EXPECT_EQ(t.tokenize("hello\xe2\x80\xa9world"), (V{"hello", "world"}));  // U+2029
  EXPECT_EQ(t.ids_of(t.tokenize("[SEP]")), (std::vector<int64_t>{3}));
}

// The folder holding node_modules/tokenizers, or "" with the reason.
std::string tokenizers_dir(std::string* why) { return test_peers::find_npm_package("tokenizers", why); }

TEST(WordPiecePeer, MatchesHuggingFaceTokenizers) {
  std::string why;
  const std::string dir = tokenizers_dir(&why);
  if (dir.empty()) {
    // in CI the oracle must be there: a missing one is a failure, not a skip
    if (std::getenv("CI")) FAIL() << why;
    GTEST_SKIP() << why;
  }
  const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff",
                                          "##able", ",", "!", "the", "cafe", "中", "国", "a", "##b", "naive", ".", "'",
                                          "s", "[", "]", "sep", "-", "x"};
  const std::vector<std::string> texts = {
      "Hello, WORLD!", "  Café\tnaïve\n", "unaffable", "the world's", "中国", "zzz", "abb", "abz",
      "hello [SEP] world", "hello[SEP]world[CLS]", "[sep]", "[MASK]hello[MASK]", "[UNK][PAD]",
      "hel\xee\x80\x80lo",          // U+E000, private use: dropped
      "hello\xe2\x80\xa8world",      // U+2028 line separator: a space
      "hello\xe2\x80\xa9world",      // U+2029 paragraph separator
      "a\xc2\x85" "b",                 // U+0085 NEL: a control (dropped), though White_Space
      "hel\xcd\xb8lo",                // U+0378, unassigned: kept
      "a\xc2\xa0" "b",                 // U+00A0 no-break space
      "x\xe2\x80\x8bx",              // U+200B zero-width space (format): dropped
      "x\xef\xbb\xbfx",              // U+FEFF byte order mark (format)
      "x\xe3\x80\x80x",              // U+3000 ideographic space
      "hello\x01world", "-x-", "\xe2\x80\x94", std::string(120, 'a'), "a" + std::string(99, 'b'), ""};
  const std::string in = std::string(RLX_BINARY_DIR) + "/wordpiece_peer_input.json";
  std::ofstream(in) << nlohmann::json{{"vocab", vocab}, {"texts", texts}}.dump();
  const std::string cmd = "NODE_PATH='" + dir + "/node_modules' node '" + std::string(RLX_SOURCE_DIR) +
                          "/tests/unit/wordpiece_peer.cjs' '" + in + "' 2>&1";
  std::string out;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  ASSERT_EQ(::pclose(p), 0) << out;
  auto peer = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(peer.is_array() && peer.size() == texts.size()) << out;
  auto t = WordPieceTokenizer::from_tokens(vocab, {});
  ASSERT_TRUE(t.has_value()) << t.status().to_string();
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(t->tokenize(texts[i]), peer[i].get<std::vector<std::string>>()) << "text " << i << ": '" << texts[i] << "'";
}

TEST(WordPiece, CasedKeepsCase) {
  WordPieceOptions o;
  o.lower_case = false;
  o.strip_accents = false;
  auto t = make(o);
  EXPECT_EQ(t.tokenize("Hello hello"), (V{"[UNK]", "hello"}));
}

TEST(WordPiece, BatchEncodingPadsTruncatesAndMasks) {
  auto t = make();
  Encoding e = t.encode_batch({"hello world", "hello", "hello world hello world"}, 5);
  ASSERT_EQ(e.batch, 3);
  ASSERT_EQ(e.seq, 5);
  EXPECT_EQ(std::vector<int64_t>(e.ids.begin(), e.ids.begin() + 5), (std::vector<int64_t>{2, 4, 5, 3, 0}));
  EXPECT_EQ(std::vector<int64_t>(e.attention_mask.begin(), e.attention_mask.begin() + 5),
            (std::vector<int64_t>{1, 1, 1, 1, 0}));
  EXPECT_EQ(std::vector<int64_t>(e.ids.begin() + 5, e.ids.begin() + 10), (std::vector<int64_t>{2, 4, 3, 0, 0}));
  // truncated to 5 with [SEP] kept last
  EXPECT_EQ(std::vector<int64_t>(e.ids.begin() + 10, e.ids.end()), (std::vector<int64_t>{2, 4, 5, 4, 3}));
  EXPECT_EQ(e.lengths, (std::vector<int64_t>{4, 3, 5}));
  Encoding p = t.encode_batch({"hello"}, 128, 16);
  EXPECT_EQ(p.seq, 16);
}

TEST(WordPiece, MissingSpecialTokenIsAnError) {
  auto t = WordPieceTokenizer::from_tokens({"[PAD]", "hello"});
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.status().message().find("[UNK]"), std::string::npos);
}

}  // namespace
}  // namespace rlx::text
