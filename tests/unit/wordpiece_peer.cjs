// The peer of tests/unit/wordpiece_test.cpp: Hugging Face's tokenizers (the Rust library's Node
// binding) with a BERT uncased tokenizer.json built from the vocabulary given; prints the pieces
// of each text, without [CLS]/[SEP], as a JSON list of lists.
// Usage: node wordpiece_peer.cjs INPUT.json   ({"vocab": [...], "texts": [...]})
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const vocab = {};
input.vocab.forEach((t, i) => { vocab[t] = i; });
const specials = input.vocab.filter((t) => ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].includes(t));
const json = {
  version: '1.0', truncation: null, padding: null, post_processor: null, decoder: null,
  added_tokens: specials.map((t) => ({ id: vocab[t], content: t, single_word: false, lstrip: false, rstrip: false,
                                       normalized: false, special: true })),
  normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
  pre_tokenizer: { type: 'BertPreTokenizer' },
  model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab },
};
const path = process.argv[2] + '.tokenizer.json';
fs.writeFileSync(path, JSON.stringify(json));
(async () => {
  const tok = Tokenizer.fromFile(path);
  const out = [];
  for (const t of input.texts) out.push((await tok.encode(t, null, { addSpecialTokens: false })).getTokens());
  console.log(JSON.stringify(out));
})();
