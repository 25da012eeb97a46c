import { s } from './dom.js';

/** Inline SVG charts: stacked bars (pushes per day by outcome) and a line (pushes per second). */
export interface Series {
  label: string;
  className: string;
}

const W = 720;
const H = 220;
const PAD = { left: 48, right: 12, top: 12, bottom: 28 };

function niceMax(v: number): number {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v)!;
}

function axis(max: number): SVGElement[] {
  const plotH = H - PAD.top - PAD.bottom;
  return [0, 0.5, 1].map((f) =>
    s(
      'g',
      { class: 'tick' },
      s('line', { x1: PAD.left, x2: W - PAD.right, y1: PAD.top + plotH * (1 - f), y2: PAD.top + plotH * (1 - f) }),
      s('text', { x: PAD.left - 6, y: PAD.top + plotH * (1 - f) + 4, 'text-anchor': 'end' }, String(Math.round(max * f))),
    ),
  );
}

export function stackedBars(labels: string[], values: number[][], series: Series[], title: string): SVGElement {
  const totals = values.map((row) => row.reduce((a, b) => a + b, 0));
  const max = niceMax(Math.max(0, ...totals));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, labels.length);
  const bars = labels.map((label, i) => {
    let y = PAD.top + plotH;
    const parts = series.map((serie, j) => {
      const hgt = (values[i]![j]! / max) * plotH;
      y -= hgt;
      return s('rect', { class: serie.className, x: PAD.left + i * slot + slot * 0.15, y, width: slot * 0.7, height: hgt });
    });
    const tip = `${label}: ${series.map((serie, j) => `${serie.label} ${values[i]![j]}`).join(', ')}`;
    // every step-th label, counted back from the last (today) so the last is always shown and none overlap
    const step = Math.ceil(labels.length / 8);
    const showLabel = (labels.length - 1 - i) % step === 0;
    return s(
      'g',
      { class: 'bar' },
      s('title', {}, tip),
      ...parts,
      showLabel && s('text', { x: PAD.left + i * slot + slot / 2, y: H - 8, 'text-anchor': 'middle' }, label.slice(5)),
    );
  });
  return s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': title }, ...axis(max), ...bars);
}

export function line(points: { t: number; v: number }[], title: string): SVGElement {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const t0 = points[0]?.t ?? 0;
  const t1 = Math.max(t0 + 1, points[points.length - 1]?.t ?? 1);
  const max = niceMax(Math.max(0, ...points.map((p) => p.v)));
  const x = (t: number) => PAD.left + ((t - t0) / (t1 - t0)) * plotW;
  const y = (v: number) => PAD.top + plotH * (1 - v / max);
  const d = points.map((p, i) => `${i ? 'L' : 'M'}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
  return s(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': title },
    ...axis(max),
    s('path', { class: 'rate', d }),
    s('text', { x: PAD.left, y: H - 8 }, '0 s'),
    s('text', { x: W - PAD.right, y: H - 8, 'text-anchor': 'end' }, `${((t1 - t0) / 1000).toFixed(1)} s`),
  );
}
