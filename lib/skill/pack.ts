// The skill pack (SPEC 7): the files under skill/, served one by one under /skill/ and as a
// deterministic .tar.gz — the same bytes on every fetch and every start of the same release.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { PROJECT_ROOT } from "../paths";
import zlib from "node:zlib";

const SKILL_ROOT = path.join(PROJECT_ROOT, "skill") + path.sep;

/** Fixed metadata, so the archive depends on the file contents only. */
const MTIME = Date.parse("2026-01-01T00:00:00Z") / 1000;
const DIR_MODE = 0o755;

export interface SkillFile {
  /** Path inside the pack, e.g. "parley/SKILL.md". */
  path: string;
  data: Uint8Array<ArrayBuffer>;
  mode: number;
}

export interface SkillPack {
  files: SkillFile[];
  tarball: Uint8Array<ArrayBuffer>;
  etag: string;
}

function walk(dir: string, prefix: string): SkillFile[] {
  const files: SkillFile[] = [];
  const entries = fs.readdirSync(dir, { withFileTypes: true }).filter((e) => !e.name.startsWith("."));
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const full = path.join(dir, entry.name);
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) files.push(...walk(full, rel));
    else if (entry.isFile()) {
      // Scripts are executable; everything else is plain data.
      const mode = /\.(mjs|js|sh|py)$/.test(entry.name) ? 0o755 : 0o644;
      files.push({ path: rel, data: new Uint8Array(fs.readFileSync(full)), mode });
    }
  }
  return files;
}

function octal(header: Buffer, offset: number, length: number, value: number): void {
  header.write(value.toString(8).padStart(length - 1, "0") + "\0", offset, length, "latin1");
}

/** One ustar header block; names over 100 bytes go through the 155-byte prefix field. */
function tarHeader(name: string, size: number, mode: number, type: "0" | "5"): Buffer {
  const header = Buffer.alloc(512);
  let prefix = "";
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf("/", name.length - 2);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
    if (cut < 0 || Buffer.byteLength(base) > 100 || Buffer.byteLength(prefix) > 155) throw new Error(`skill pack: path too long for tar: ${name}`);
  }
  header.write(base, 0, 100, "utf8");
  octal(header, 100, 8, mode);
  octal(header, 108, 8, 0); // uid
  octal(header, 116, 8, 0); // gid
  octal(header, 124, 12, size);
  octal(header, 136, 12, MTIME);
  header.fill(0x20, 148, 156); // checksum field counts as spaces while summing
  header.write(type, 156, 1, "latin1");
  header.write("ustar\0" + "00", 257, 8, "latin1");
  header.write(prefix, 345, 155, "utf8");
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8, "latin1");
  return header;
}

/** A ustar archive of the files with their parent directories, padded to whole 10 KiB records. */
export function tarOf(files: SkillFile[]): Buffer {
  const blocks: Buffer[] = [];
  const dirs = new Set<string>();
  for (const file of files) {
    const parts = file.path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const dir = `${parts.slice(0, i).join("/")}/`;
      if (dirs.has(dir)) continue;
      dirs.add(dir);
      blocks.push(tarHeader(dir, 0, DIR_MODE, "5"));
    }
    blocks.push(tarHeader(file.path, file.data.length, file.mode, "0"), Buffer.from(file.data));
    const pad = (512 - (file.data.length % 512)) % 512;
    if (pad) blocks.push(Buffer.alloc(pad));
  }
  blocks.push(Buffer.alloc(1024)); // end of archive
  const tar = Buffer.concat(blocks);
  const record = 10240;
  return Buffer.concat([tar, Buffer.alloc((record - (tar.length % record)) % record)]);
}

/** gzip with a zero mtime and a fixed OS byte, so the bytes do not depend on when or where. */
export function gzipDeterministic(data: Uint8Array): Buffer {
  const gz = zlib.gzipSync(data, { level: 9 });
  gz.writeUInt32LE(0, 4);
  gz[9] = 3; // "Unix"
  return gz;
}

let cached: SkillPack | undefined;

/** The pack, read and built once per process. */
export function skillPack(): SkillPack {
  if (!cached) {
    const files = walk(SKILL_ROOT, "");
    const tarball = new Uint8Array(gzipDeterministic(tarOf(files)));
    const etag = `"${crypto.createHash("sha256").update(tarball).digest("hex").slice(0, 32)}"`;
    cached = { files, tarball, etag };
  }
  return cached;
}
