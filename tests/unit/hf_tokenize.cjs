// The peer of tests/unit/tokenizer_peer_test.cpp: Hugging Face's tokenizers (the Rust library's
// Node binding) encodes each text with each tokenizer.json, with and without the special tokens
// the post-processor adds, and decodes the ids of the encoding without them (special tokens kept).
// Usage: node hf_tokenize.cjs INPUT.json   ({"files": [...], "texts": [...]})
// Prints {"FILE": [{"with": [ids], "without": [ids], "decoded": "text"}, ...], ...}.
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
const input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
(async () => {
  const out = {};
  for (const file of input.files) {
    const tok = Tokenizer.fromFile(file);
    const rows = [];
    for (const t of input.texts) {
      const withSpecial = (await tok.encode(t, null, { addSpecialTokens: true })).getIds();
      const without = (await tok.encode(t, null, { addSpecialTokens: false })).getIds();
      const decoded = await tok.decode(without, false);
      rows.push({ with: withSpecial, without, decoded });
    }
    out[file] = rows;
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(String(e)); process.exit(1); });
