const SVG = "http://www.w3.org/2000/svg";

/**
 * A small inline SVG line of `values` scaled to [0, max] (the highest value when max is not
 * given), with a title for hover; empty when there are fewer than two values.
 */
export function sparkline(values: number[], title: string, color: string, max?: number): SVGSVGElement {
  const w = 90;
  const h = 22;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(w));
  svg.setAttribute("height", String(h));
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.classList.add("spark");
  const t = document.createElementNS(SVG, "title");
  t.textContent = title;
  svg.append(t);
  if (values.length < 2) return svg;
  const top = max ?? Math.max(...values, 1e-9);
  const points = values.map((v, i) => `${((i / (values.length - 1)) * (w - 2) + 1).toFixed(1)},${(h - 1 - (Math.min(v, top) / top) * (h - 2)).toFixed(1)}`);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", points.join(" "));
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", color);
  line.setAttribute("stroke-width", "1.5");
  svg.append(line);
  return svg;
}
