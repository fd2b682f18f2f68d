import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalize, canonicalBytes } from '../../lib/log/jcs';
import { bytesToHex } from '../../lib/log/bytes';

// RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical forms.
const IEEE_EXAMPLES: [string, string][] = [
  ['0000000000000000', '0'],
  ['8000000000000000', '0'], // minus zero
  ['0000000000000001', '5e-324'],
  ['8000000000000001', '-5e-324'],
  ['7fefffffffffffff', '1.7976931348623157e+308'],
  ['ffefffffffffffff', '-1.7976931348623157e+308'],
  ['4340000000000000', '9007199254740992'],
  ['c340000000000000', '-9007199254740992'],
  ['4430000000000000', '295147905179352830000'],
  ['44b52d02c7e14af5', '9.999999999999997e+22'],
  ['44b52d02c7e14af6', '1e+23'],
  ['44b52d02c7e14af7', '1.0000000000000001e+23'],
  ['444b1ae4d6e2ef4e', '999999999999999700000'],
  ['444b1ae4d6e2ef4f', '999999999999999900000'],
  ['444b1ae4d6e2ef50', '1e+21'],
  ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
  ['3eb0c6f7a0b5ed8d', '0.000001'],
  ['41b3de4355555553', '333333333.3333332'],
  ['41b3de4355555554', '333333333.33333325'],
  ['41b3de4355555555', '333333333.3333333'],
  ['41b3de4355555556', '333333333.3333334'],
  ['41b3de4355555557', '333333333.33333343'],
  ['becbf647612f3696', '-0.0000033333333333333333'],
  ['43143ff3c1cb0959', '1424953923781206.2'],
];

function fromIeee(hex: string): number {
  return new DataView(new BigUint64Array([BigInt('0x' + hex)]).buffer).getFloat64(0, true);
}

test('RFC 8785 Appendix B number serialisation (IEEE-754 bit patterns)', () => {
  for (const [hex, want] of IEEE_EXAMPLES) {
    assert.equal(canonicalize(fromIeee(hex)), want, hex);
  }
});

test('RFC 8785 number examples written as JSON literals', () => {
  const cases: [string, string][] = [
    ['1e30', '1e+30'],
    ['1E30', '1e+30'],
    ['4.50', '4.5'],
    ['2e-3', '0.002'],
    ['0.000001', '0.000001'],
    ['1e-7', '1e-7'],
    ['0.000000000000000000000000001', '1e-27'],
    ['-0', '0'],
    ['9007199254740992', '9007199254740992'],
    ['333333333.33333329', '333333333.3333333'],
    ['1E21', '1e+21'],
    ['1e20', '100000000000000000000'],
    ['-1.5', '-1.5'],
  ];
  for (const [lit, want] of cases) assert.equal(canonicalize(JSON.parse(lit)), want, lit);
});

test('NaN and Infinity are rejected (RFC 8785 Appendix B: 7fffffffffffffff, 7ff0000000000000)', () => {
  assert.throws(() => canonicalize(fromIeee('7fffffffffffffff')));
  assert.throws(() => canonicalize(fromIeee('7ff0000000000000')));
  assert.throws(() => canonicalize(NaN));
  assert.throws(() => canonicalize({ a: [Infinity] }));
  assert.throws(() => canonicalize(-Infinity));
});

test('RFC 8785 §3.2.3 key ordering by UTF-16 code units', () => {
  const input = {
    '\u20ac': 'Euro Sign',
    '\r': 'Carriage Return',
    '\ufb33': 'Hebrew Letter Dalet With Dagesh',
    '1': 'One',
    '\ud83d\ude00': 'Emoji: Grinning Face',
    '\u0080': 'Control',
    '\u00f6': 'Latin Small Letter O With Diaeresis',
  };
  const order = [
    'Carriage Return',
    'One',
    'Control',
    'Latin Small Letter O With Diaeresis',
    'Euro Sign',
    'Emoji: Grinning Face',
    'Hebrew Letter Dalet With Dagesh',
  ];
  const text = canonicalize(input);
  const positions = order.map((v) => text.indexOf(`"${v}"`));
  assert.ok(positions.every((p) => p > 0));
  assert.deepEqual([...positions].sort((a, b) => a - b), positions);
  assert.equal(
    text,
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
      '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  );
});

test('nested objects are sorted too, arrays keep their order, no whitespace', () => {
  assert.equal(
    canonicalize({ b: [3, 1, { z: 1, a: 2 }], a: { y: null, x: true } }),
    '{"a":{"x":true,"y":null},"b":[3,1,{"a":2,"z":1}]}',
  );
  assert.equal(canonicalize([]), '[]');
  assert.equal(canonicalize({}), '{}');
  assert.equal(canonicalize(Object.create(null)), '{}');
});

test('string escaping', () => {
  // \b \t \n \f \r use short forms; other C0 controls are \u00xx (lowercase hex).
  assert.equal(canonicalize('\b\t\n\f\r'), '"\\b\\t\\n\\f\\r"');
  assert.equal(canonicalize('\u0000\u0001\u000b\u000e\u001f'), '"\\u0000\\u0001\\u000b\\u000e\\u001f"');
  assert.equal(canonicalize('"\\'), '"\\"\\\\"');
  // "/" and DEL are not escaped; non-ASCII is kept literally, encoded as UTF-8.
  assert.equal(canonicalize('a/b\u007f'), '"a/b\u007f"');
  assert.equal(canonicalize('é€😀'), '"é€😀"');
  assert.equal(bytesToHex(canonicalBytes('€😀')), '22e282acf09f988022');
});

test('lone surrogates are rejected, in values and in keys', () => {
  assert.throws(() => canonicalize('\ud800'));
  assert.throws(() => canonicalize('a\udfffb'));
  assert.throws(() => canonicalize('\ude00\ud83d')); // reversed pair
  assert.throws(() => canonicalize({ '\ud83d': 1 }));
  assert.doesNotThrow(() => canonicalize('\ud83d\ude00'));
});

test('RFC 8785 §3.2.4 main example, text and UTF-8 bytes', () => {
  const input = JSON.parse(String.raw`{
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  }`);
  const want = String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`;
  assert.equal(canonicalize(input), want);
  // RFC 8785 §3.2.4 lists the UTF-8 bytes of the result.
  const rfcBytes = `
    7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72
    75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a
    5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31
    65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37
    5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30
    30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d`;
  assert.equal(bytesToHex(canonicalBytes(input)), rfcBytes.replace(/\s+/g, ''));
});

test('undefined members are omitted; values JSON cannot express unambiguously throw', () => {
  assert.equal(canonicalize({ a: 1, b: undefined }), '{"a":1}');
  assert.throws(() => canonicalize(undefined));
  assert.throws(() => canonicalize([1, undefined]));
  assert.throws(() => canonicalize({ a: 1n }));
  assert.throws(() => canonicalize({ a: () => 1 }));
  assert.throws(() => canonicalize({ a: new Date(0) }));
  assert.throws(() => canonicalize(new Map()));
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.throws(() => canonicalize(cyclic));
  // The same object twice (not a cycle) is fine.
  const shared = { x: 1 };
  assert.equal(canonicalize({ a: shared, b: shared }), '{"a":{"x":1},"b":{"x":1}}');
});
