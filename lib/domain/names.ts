/**
 * Agent names (SPEC 2, `agent_id`): which names are refused, and when two names are the same agent.
 *
 * - **Input form.** A name is normalised (Unicode NFKC, then trimmed) before anything else; the
 *   normalised form is what is stored and displayed.
 * - **Refused.** Invisible and format characters (zero-width spaces and joiners, the BOM, soft
 *   hyphens, word joiners, variation selectors, fillers…) and bidirectional controls (RLO, LRE, PDF,
 *   isolates, marks), which make a name display as something it is not; and any name whose
 *   skeleton is that of a reserved service name (`server`, `owner`, `arbiter`): Cyrillic `ѕеrvеr`,
 *   full-width `ｏｗｎｅｒ`, small capitals, accents, and so on.
 * - **Same agent.** Within a room, names compare by `agentKey`: NFKC, trimmed, case-folded. `Alice`,
 *   `ALICE` and ` alice ` are one agent for confirmations, ownership, reviews, turns and key pinning;
 *   each event still keeps the name as its author wrote it.
 */
import { SERVICE_ACTORS } from "./room";

/**
 * The comparison key of an agent name: NFKC, trimmed, case-folded. Upper- then lower-casing gives
 * full case folding's results (`ß` ≡ `SS`, `ǅ` ≡ `ǆ`), and final sigma folds to `σ` as it does there.
 */
export function agentKey(name: string): string {
  return agentKeys(name);
}
// Every post compares names (the loop guard, pins, turns): each name's key is made once.
const agentKeys = remembered((name) => name.normalize("NFKC").trim().toUpperCase().toLowerCase().replace(/\u03c2/g, "\u03c3").normalize("NFKC"));

/**
 * `judge` with its answer for each name kept, up to 10,000 names (then all dropped): agents name
 * themselves on every request and keep their names, so the same few names come back all the time.
 */
function remembered<T>(judge: (name: string) => T): (name: string) => T {
  const kept = new Map<string, T>();
  return (name) => {
    if (kept.has(name)) return kept.get(name)!;
    if (kept.size >= 10_000) kept.clear();
    const answer = judge(name);
    kept.set(name, answer);
    return answer;
  };
}

/** Whether two names are the same agent (by `agentKey`). */
export const sameAgent = (a: string | null | undefined, b: string | null | undefined): boolean =>
  a != null && b != null && (a === b || agentKey(a) === agentKey(b));

// ---- characters a name must not contain ----

/** Bidirectional controls: embeddings, overrides and their pop (U+202A–202E), isolates (U+2066–2069), LRM, RLM, ALM. */
const BIDI = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/u;

/**
 * Characters that render as nothing (or as a blank that is not a space): every format character
 * (\p{Cf}: zero-width space/joiners, word joiner, BOM, soft hyphen, invisible operators, tags…),
 * line and paragraph separators, variation selectors, the combining grapheme joiner, Mongolian
 * free variation selectors, Khmer inherent vowels, Hangul fillers and the blank Braille pattern.
 */
const INVISIBLE = /[\p{Cf}\p{Zl}\p{Zp}\u115f\u1160\u2800\u3164\uffa0]|\u034f|\u17b4|\u17b5|[\u180b-\u180f]|[\ufe00-\ufe0f]|[\u{e0100}-\u{e01ef}]/u;

const codePoint = (c: string) => `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;

// ---- skeletons: what a name looks like ----

/**
 * Look-alikes of the letters of the reserved names (a b e i n o r s t v w), as code points, both
 * cases. NFKC runs first and already folds full-width, mathematical, circled, super- and subscript
 * and other compatibility forms, so the table holds only what NFKC keeps: mostly Unicode's own
 * confusables data (UTS #39, confusables.txt) for these letters, plus small capitals, stroked and
 * hooked Latin letters and a few near look-alikes it leaves out (Greek ε υ ω, Cyrillic є п ш, ø).
 * Every entry is NFD-stable (a unit test checks), since the skeleton maps after NFD.
 */
const LOOKALIKES: Record<string, number[]> = {
  a: [
    0x0251, 0x2c6d, // Latin alpha ɑ Ɑ
    0x0430, 0x0410, // Cyrillic а А
    0x03b1, 0x0391, // Greek α Α
    0x237a, // APL alpha ⍺
    0x1d00, // small capital ᴀ
    0x13aa, 0xab7a, // Cherokee Ꭺ ꭺ
    0x15c5, 0xa4ee, // Canadian syllabics ᗅ, Lisu ꓮ
    0x2c80, 0x2c81, // Coptic Ⲁ ⲁ
    0x102a0, 0x16f40, // Carian 𐊠, Miao 𖽀
  ],
  b: [
    0x0184, 0x0185, 0x0182, 0x0183, // Latin tone six Ƅ ƅ, topbar Ƃ ƃ
    0x0181, 0x0253, // b with hook Ɓ ɓ
    0x0299, // small capital ʙ
    0x042c, 0x044c, // Cyrillic soft sign Ь ь
    0x0412, 0x0432, // Cyrillic ve В в
    0x0392, 0x03b2, // Greek beta Β β
    0xa7b4, 0xa7b5, // Latin beta Ꞵ ꞵ
    0x13cf, 0xab9f, 0x13f4, 0x13fc, // Cherokee Ꮟ ꮟ Ᏼ ᏼ
    0x1472, 0x15af, 0x15f7, // Canadian syllabics ᑲ ᖯ ᗷ
    0xa4d0, 0x10282, 0x102a1, 0x10301, // Lisu ꓐ, Lycian 𐊂, Carian 𐊡, Old Italic 𐌁
  ],
  e: [
    0x0435, 0x0415, // Cyrillic е Е
    0x0454, 0x0404, // Cyrillic ukrainian ie є Є
    0x04bd, 0x04bc, // Cyrillic abkhasian che ҽ Ҽ
    0x03b5, 0x0395, // Greek epsilon ε Ε
    0x025b, 0x0190, // Latin open e ɛ Ɛ
    0x1d07, // small capital ᴇ
    0x212e, 0xab32, 0x22ff, // estimated ℮, blackletter e ꬲ, Z notation ⋿
    0x13ac, 0xab7c, // Cherokee Ꭼ ꭼ
    0xa4f0, 0x2d39, // Lisu ꓰ, Tifinagh ⴹ
    0x118a6, 0x118ae, 0x10286, // Warang Citi 𑢦 𑢮, Lycian 𐊆
  ],
  i: [
    0x006c, 0x0031, 0x007c, 0x00a1, // l, 1, |, ¡: a vertical stroke reads as i
    0x0131, // dotless ı
    0x026a, // small capital ɪ
    0x0269, 0x0196, // Latin iota ɩ Ɩ
    0x0268, // i with stroke ɨ
    0x01c0, // dental click ǀ
    0x0456, 0x0406, // Cyrillic і І
    0x04cf, 0x04c0, // Cyrillic palochka ӏ Ӏ
    0xa647, 0xa646, // Cyrillic iota ꙇ Ꙇ
    0x03b9, 0x0399, // Greek iota ι Ι
    0x2373, 0x2223, // APL iota ⍳, divides ∣
    0x13a5, 0xab75, // Cherokee Ꭵ ꭵ
    0xa4f2, 0x2d4f, 0x16c1, // Lisu ꓲ, Tifinagh ⵏ, runic isaz ᛁ
    0x05c0, 0x05d5, 0x0627, // Hebrew paseq ׀ and vav ו, Arabic alef ا
    0x118c3, // Warang Citi 𑣃
  ],
  n: [
    0x0578, 0x0548, 0x057c, // Armenian vo ո Ո, ra ռ
    0x0274, // small capital ɴ
    0x039d, 0x03b7, // Greek capital nu Ν, eta η
    0x043f, 0x041f, // Cyrillic pe п П
    0x019e, 0x0273, 0x014b, // Latin long-leg ƞ, retroflex ɳ, eng ŋ
    0x2c9a, 0x2c9b, // Coptic Ⲛ ⲛ
    0xa4e0, 0x1466, 0x2229, // Lisu ꓠ, Canadian syllabics ᑎ, intersection ∩
    0x10513, // Elbasan 𐔓
  ],
  o: [
    0x0030, 0x3007, // 0, ideographic zero 〇
    0x03bf, 0x039f, 0x03c3, // Greek omicron ο Ο, sigma σ
    0x043e, 0x041e, // Cyrillic о О
    0x0585, 0x0555, // Armenian օ Օ
    0x1d0f, 0x1d11, 0xab3d, // small capital ᴏ, sideways ᴑ, blackletter ꬽ
    0x00f8, 0x00d8, 0x0275, // ø Ø, barred ɵ
    0x2c9f, 0x2c9e, // Coptic ⲟ Ⲟ
    0x10ff, 0x05e1, // Georgian ჿ, Hebrew samekh ס
    0x0647, 0x06be, 0x06c1, 0x06d5, // Arabic heh forms ه ھ ہ ە
    0x0665, 0x06f5, 0x07c0, 0x0966, 0x09e6, 0x0a66, 0x0ae6, 0x0b66, // digit zeros and fives: ٥ ۵ ߀ ० ০ ੦ ૦ ୦
    0x0be6, 0x0c66, 0x0ce6, 0x0d66, 0x0e50, 0x0ed0, 0x1040, // ௦ ౦ ೦ ൦ ๐ ໐ ၀
    0x0c02, 0x0c82, 0x0d02, 0x0d82, // anusvara signs ం ಂ ം ං
    0x0b20, 0x0d20, 0x101d, 0x12d0, // Oriya ଠ, Malayalam ഠ, Myanmar ဝ, Ethiopic ዐ
    0xa4f3, 0x2d54, 0x25cb, 0x25ef, // Lisu ꓳ, Tifinagh ⵔ, circles ○ ◯
    0x104ea, 0x104c2, 0x1042c, 0x10404, // Osage 𐓪 𐓂, Deseret 𐐬 𐐄
    0x118c8, 0x118d7, 0x118e0, 0x114d0, 0x10292, 0x102ab, 0x10516, // Warang Citi, Tirhuta, Lycian, Carian, Elbasan
  ],
  r: [
    0x0433, 0x0413, 0x0491, 0x0490, // Cyrillic ghe г Г, ghe with upturn ґ Ґ
    0x0280, 0x01a6, // small capital ʀ, yr Ʀ
    0x1d26, // small capital gamma ᴦ
    0x027e, 0x027d, 0x027c, 0x024d, 0x024c, // fishhook ɾ, tail ɽ, long leg ɼ, stroke ɍ Ɍ
    0xab47, 0xab48, // r without handle ꭇ, double r ꭈ
    0x2c85, 0x2c84, // Coptic gamma ⲅ Ⲅ
    0xab81, 0x13b1, 0x13a1, 0xab71, 0x13d2, 0xaba2, // Cherokee ꮁ Ꮁ Ꭱ ꭱ Ꮢ ꮢ
    0x1587, 0xa4e3, 0x104b4, 0x16f35, // Canadian syllabics ᖇ, Lisu ꓣ, Osage 𐒴, Miao 𖼵
  ],
  s: [
    0x0455, 0x0405, // Cyrillic dze ѕ Ѕ
    0xa731, // small capital ꜱ
    0x01bd, 0x01bc, // tone five ƽ Ƽ
    0x0282, 0x023f, // s with hook ʂ, swash tail ȿ
    0x054f, 0x057f, // Armenian tiwn Տ տ
    0x13da, 0xabaa, 0x13d5, 0xaba5, // Cherokee Ꮪ ꮪ Ꮥ ꮥ
    0xa4e2, 0x10296, 0x16f3a, // Lisu ꓢ, Carian 𐊖, Miao 𖼺
    0x10420, 0x10448, 0x118c1, // Deseret 𐐠 𐑈, Warang Citi 𑣁
  ],
  t: [
    0x0442, 0x0422, // Cyrillic te т Т
    0x03c4, 0x03a4, // Greek tau τ Τ
    0x1d1b, // small capital ᴛ
    0x01ad, 0x01ac, 0x01ab, 0x0288, 0x01ae, 0x0167, 0x0166, // hooked and stroked ƭ Ƭ ƫ ʈ Ʈ ŧ Ŧ
    0x2ca6, 0x2ca7, // Coptic Ⲧ ⲧ
    0x13a2, 0xab72, // Cherokee Ꭲ ꭲ
    0xa4d4, 0x22a4, 0x27d9, // Lisu ꓔ, down tacks ⊤ ⟙
    0x10315, 0x10297, 0x102b1, 0x118bc, 0x16f0a, // Old Italic, Carian, Lycian, Warang Citi, Miao
  ],
  v: [
    0x0475, 0x0474, // Cyrillic izhitsa ѵ Ѵ
    0x03bd, 0x03c5, // Greek nu ν, upsilon υ
    0x028b, 0x01b2, // v with hook ʋ Ʋ
    0x1d20, // small capital ᴠ
    0x2228, 0x22c1, // logical or ∨ ⋁
    0x05d8, 0x0667, 0x06f7, // Hebrew tet ט, Arabic sevens ٧ ۷
    0x13d9, 0xaba9, 0x142f, // Cherokee Ꮩ ꮩ, Canadian syllabics ᐯ
    0xa4e6, 0x2d38, 0xa6df, // Lisu ꓦ, Tifinagh ⴸ, Bamum ꛟ
    0x11706, 0x118c0, 0x118a0, 0x1051d, 0x16f08, // Ahom, Warang Citi, Elbasan, Miao
  ],
  w: [
    0x0461, 0x0460, // Cyrillic omega ѡ Ѡ
    0x051d, 0x051c, // Cyrillic we ԝ Ԝ
    0x0448, 0x0428, // Cyrillic sha ш Ш
    0x03c9, // Greek omega ω
    0x026f, // turned m ɯ
    0x1d21, // small capital ᴡ
    0x0561, // Armenian ayb ա
    0x13b3, 0xab83, 0x13d4, 0xaba4, // Cherokee Ꮃ ꮃ Ꮤ ꮤ
    0xa4ea, 0x15ef, // Lisu ꓪ, Canadian syllabics ᗯ
    0x1170a, 0x1170e, 0x1170f, 0x118ef, 0x118e6, // Ahom, Warang Citi
  ],
};

const PROTOTYPE = new Map<string, string>();
for (const [letter, points] of Object.entries(LOOKALIKES)) for (const p of points) PROTOTYPE.set(String.fromCodePoint(p), letter);

/** The look-alike table, for its tests: character → the Latin letter it renders like. */
export const lookalikeTable = (): ReadonlyMap<string, string> => PROTOTYPE;

/** A character's prototype: its own entry, else that of its other case (Cherokee and Greek capitals fold onto listed forms). */
function prototypeOf(c: string): string {
  const direct = PROTOTYPE.get(c);
  if (direct !== undefined) return direct;
  for (const other of [c.toLowerCase(), c.toUpperCase()]) {
    const found = [...other].length === 1 ? PROTOTYPE.get(other) : undefined;
    if (found !== undefined) return found;
  }
  return c;
}

const MARKS_ALL = /\p{M}/gu;
const INVISIBLE_ALL = new RegExp(INVISIBLE.source, "gu");
const BIDI_ALL = new RegExp(BIDI.source, "gu");

/**
 * What a name looks like, for comparing against the reserved names: NFKC, decomposed (NFD),
 * look-alikes replaced by the Latin letter they resemble, then every remaining combining mark and
 * invisible character dropped (`sérvér` looks like `server`), case-folded, and `vv` read as `w`.
 */
export function skeleton(name: string): string {
  const decomposed = name.normalize("NFKC").normalize("NFD");
  let out = "";
  for (const c of decomposed) out += prototypeOf(c);
  return out
    .replace(MARKS_ALL, "")
    .replace(INVISIBLE_ALL, "")
    .replace(BIDI_ALL, "")
    .trim()
    .toUpperCase()
    .toLowerCase()
    .replace(/vv/g, "w");
}

const RESERVED_SKELETONS = new Set([...SERVICE_ACTORS].map(skeleton));

/** Whether a name is, or looks like, one of the service's own names (server, owner, arbiter). */
export const looksReserved = (name: string): boolean => RESERVED_SKELETONS.has(skeleton(name));

/**
 * Why an agent name (already NFKC-normalised) is refused, as the end of a `field: …` sentence;
 * null when it is fine. Length and control characters are the schema's own checks.
 */
export function agentNameProblem(name: string): string | null {
  return nameProblems(name);
}
// Each name judged once: its skeleton cost a post about 1 % of its time.
const nameProblems = remembered(judgeName);

function judgeName(name: string): string | null {
  const bidi = BIDI.exec(name);
  if (bidi) return `must not contain bidirectional control characters (found ${codePoint(bidi[0])}): they change how the name is displayed`;
  const invisible = INVISIBLE.exec(name);
  if (invisible) return `must not contain invisible or formatting characters (found ${codePoint(invisible[0])}): use visible characters only`;
  if (looksReserved(name)) return 'must not be "server", "arbiter", "owner" or "admin", nor look like them: those name the service in the log';
  return null;
}
