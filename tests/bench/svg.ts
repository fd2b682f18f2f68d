/**
 * The growth plot (docs/bench-growth.svg), hand-written SVG: two panels, rate against the events in
 * a room and against the rooms on the server, each line as a share of its rate at the smallest
 * size (so a flat line is a rate that does not fall as data grows), with the ±20 % band of the
 * target shaded and every point labelled with its rate.
 */

export interface GrowthSeries {
  label: string;
  /** Points [size, requests/s], ascending size. */
  points: [number, number][];
  color: string;
  dashed?: boolean;
}

export interface GrowthPanel {
  title: string;
  xLabel: string;
  series: GrowthSeries[];
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const compact = (n: number) => (n >= 1000 ? `${Number((n / 1000).toPrecision(3))}k` : String(Math.round(n)));
const sizeLabel = (n: number) => (n >= 1000 ? `${(n / 1000).toLocaleString("en")}k` : String(n));

function panel(p: GrowthPanel, x0: number, y0: number, w: number, h: number): string[] {
  const out: string[] = [];
  const xs = [...new Set(p.series.flatMap((s) => s.points.map(([x]) => x)))].sort((a, b) => a - b);
  const rel = p.series.map((s) => ({ ...s, rel: s.points.map(([x, r]) => [x, (r / s.points[0]![1]) * 100, r] as const) }));
  const yMax = Math.max(140, ...rel.flatMap((s) => s.rel.map(([, y]) => Math.ceil((y + 10) / 20) * 20)));
  const yMin = Math.min(40, ...rel.flatMap((s) => s.rel.map(([, y]) => Math.floor((y - 10) / 20) * 20)));
  const lx = (x: number) => {
    const [a, b] = [Math.log10(xs[0] ?? 1), Math.log10(xs.at(-1) ?? 10)];
    return x0 + 50 + ((Math.log10(x) - a) / Math.max(1e-9, b - a)) * (w - 80);
  };
  const ly = (y: number) => y0 + 30 + (1 - (y - yMin) / (yMax - yMin)) * (h - 80);
  out.push(`<text x="${x0 + w / 2}" y="${y0 + 16}" text-anchor="middle" font-weight="bold">${esc(p.title)}</text>`);
  // The target: within 20 % of the smallest size.
  out.push(`<rect x="${x0 + 50}" y="${ly(120)}" width="${w - 80}" height="${ly(80) - ly(120)}" fill="#2a9d8f" opacity="0.12"/>`);
  for (let y = yMin; y <= yMax; y += 20) {
    out.push(`<line x1="${x0 + 50}" x2="${x0 + w - 30}" y1="${ly(y)}" y2="${ly(y)}" stroke="#ddd"/>`);
    out.push(`<text x="${x0 + 44}" y="${ly(y) + 4}" text-anchor="end" font-size="11">${y} %</text>`);
  }
  for (const x of xs) {
    out.push(`<line x1="${lx(x)}" x2="${lx(x)}" y1="${ly(yMax)}" y2="${ly(yMin)}" stroke="#eee"/>`);
    out.push(`<text x="${lx(x)}" y="${ly(yMin) + 16}" text-anchor="middle" font-size="11">${sizeLabel(x)}</text>`);
  }
  out.push(`<text x="${x0 + w / 2}" y="${ly(yMin) + 34}" text-anchor="middle" font-size="12">${esc(p.xLabel)} (log scale)</text>`);
  rel.forEach((s, k) => {
    const d = s.rel.map(([x, y], i) => `${i ? "L" : "M"}${lx(x).toFixed(1)},${ly(y).toFixed(1)}`).join(" ");
    out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ""}/>`);
    s.rel.forEach(([x, y, r], i) => {
      out.push(`<circle cx="${lx(x).toFixed(1)}" cy="${ly(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
      // Every line starts at 100 %: the first labels stacked above the point, one line each.
      const ty = i === 0 ? ly(y) - 6 - 11 * (rel.length - 1 - k) : ly(y) - 5;
      out.push(`<text x="${(lx(x) + 5).toFixed(1)}" y="${ty.toFixed(1)}" font-size="10" fill="${s.color}">${compact(r)}/s</text>`);
    });
  });
  return out;
}

/** The SVG document: panels side by side, one legend below. */
export function growthSvg(panels: GrowthPanel[], caption: string): string {
  const w = 460;
  const h = 330;
  const legend = panels[0]?.series ?? [];
  const height = h + 60;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w * panels.length}" height="${height}" viewBox="0 0 ${w * panels.length} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
  ];
  panels.forEach((p, i) => out.push(...panel(p, i * w, 0, w, h)));
  let x = 50;
  for (const s of legend) {
    out.push(`<line x1="${x}" x2="${x + 24}" y1="${h + 14}" y2="${h + 14}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ""}/>`);
    out.push(`<text x="${x + 30}" y="${h + 18}">${esc(s.label)}</text>`);
    x += 40 + s.label.length * 7;
  }
  out.push(`<text x="50" y="${h + 44}" font-size="11" fill="#555">${esc(caption)}</text>`);
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
