# testbed/tb_svg.awk - hand-written SVG charts for testbed/RESULTS.md
# (scripts/eval.sh). Reads CSV lines "series,x,y" (no header; y numeric)
# and writes one self-contained SVG 1.1 document to stdout that a browser
# shows as it is. Series keep the order of their first appearance.
#
#   awk -f tb_svg.awk -v kind=lines|bars|stack -v title=T -v xlabel=X
#       -v ylabel=Y [-v ymax=N] [-v xlo=N] [-v vlines=X1,X2] DATA.csv > chart.svg
#
#   lines  one polyline with markers per series over numeric x
#          (error % against the request rate, seed 000 Fig. 5)
#   bars   grouped bars: x is a category name, one bar per series
#          (error % per configuration)
#   stack  stacked areas over numeric x (time), series stacked in order
#          (per-CE CPU over time, seed 000 Fig. 7)
# vlines (numeric x values, comma-separated) draws dashed vertical markers
# (phase boundaries). xlo fixes the left end of a numeric x axis. ymax fixes the top of the y axis (default: the data's maximum, rounded up);
# bars and lines clip values above it and mark them with a caret.
BEGIN {
	FS = ","
	W = 720; H = 360; L = 70; R = 150; T = 40; Bm = 50
	pw = W - L - R; ph = H - T - Bm
	split("#1f77b4,#d62728,#2ca02c,#ff7f0e,#9467bd,#8c564b,#7f7f7f,#e377c2", pal, ",")
	ns = 0; nx = 0; n = 0
}
function esc(s) { gsub(/&/, "\\&amp;", s); gsub(/</, "\\&lt;", s); gsub(/>/, "\\&gt;", s); return s }
function nice(v,   e, m) {
	if (v <= 0) return 1
	e = 10 ^ int(log(v) / log(10) - (v < 1 ? 1 : 0))
	m = v / e
	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * e
}
function fmt(v) { return (v == int(v)) ? sprintf("%d", v) : sprintf("%.3g", v) }
NF >= 3 && $3 != "" {
	s = $1; x = $2; y = $3 + 0
	if (!(s in sidx)) { sidx[s] = ++ns; sname[ns] = s }
	if (!(x in xidx)) { xidx[x] = ++nx; xname[nx] = x }
	val[sidx[s], xidx[x]] = y; has[sidx[s], xidx[x]] = 1
}
END {
	if (ns == 0) { print "tb_svg: no data" > "/dev/stderr"; exit 1 }
	# numeric x range (lines, stack)
	xmin = xname[1] + 0; xmax = xmin
	for (i = 1; i <= nx; i++) { if (xname[i] + 0 < xmin) xmin = xname[i] + 0; if (xname[i] + 0 > xmax) xmax = xname[i] + 0 }
	if (xlo != "") xmin = xlo + 0
	if (xmax <= xmin) xmax = xmin + 1
	top = 0
	for (i = 1; i <= nx; i++) {
		tot = 0
		for (k = 1; k <= ns; k++) if (has[k, i]) {
			if (kind == "stack") tot += val[k, i]; else if (val[k, i] > top) top = val[k, i]
		}
		if (kind == "stack" && tot > top) top = tot
	}
	if (ymax != "") top = ymax + 0; else top = nice(top * 1.05)
	printf "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	printf "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H
	printf "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H
	printf "<text x=\"%d\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n", L + pw / 2, esc(title)
	# y grid and labels
	for (g = 0; g <= 5; g++) {
		yv = top * g / 5; yy = T + ph - ph * g / 5
		printf "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, yy, L + pw, yy
		printf "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 6, yy + 4, fmt(yv)
	}
	printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T + ph, L + pw, T + ph
	printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, T + ph
	printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", L + pw / 2, H - 10, esc(xlabel)
	printf "<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">%s</text>\n", T + ph / 2, T + ph / 2, esc(ylabel)
	if (kind == "bars") {
		gw = pw / nx; bw = gw * 0.8 / ns
		for (i = 1; i <= nx; i++) {
			printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%s</text>\n", L + gw * (i - 0.5), T + ph + 16, esc(xname[i])
			for (k = 1; k <= ns; k++) if (has[k, i]) {
				v = val[k, i]; c = v > top ? top : v; if (c < 0) c = 0
				bx = L + gw * (i - 1) + gw * 0.1 + bw * (k - 1); bh = ph * c / top
				printf "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s %s: %s</title></rect>\n", bx, T + ph - bh, bw, bh, pal[(k - 1) % 8 + 1], esc(sname[k]), esc(xname[i]), fmt(v)
				if (v > top) printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">^</text>\n", bx + bw / 2, T + 10
			}
		}
	} else if (kind == "lines" && nx <= 12) {
		# few x values (request rates): a tick at each
		for (i = 1; i <= nx; i++)
			printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", L + pw * (xname[i] - xmin) / (xmax - xmin), T + ph + 16, esc(xname[i])
	} else {
		for (g = 0; g <= 5; g++) {
			xv = xmin + (xmax - xmin) * g / 5; xx = L + pw * g / 5
			printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", xx, T + ph + 16, fmt(xv)
		}
	}
	if (kind == "lines") {
		for (k = 1; k <= ns; k++) {
			pts = ""
			for (i = 1; i <= nx; i++) if (has[k, i]) {
				v = val[k, i]; c = v > top ? top : v; if (c < 0) c = 0
				px = L + pw * (xname[i] - xmin) / (xmax - xmin); py = T + ph - ph * c / top
				pts = pts sprintf("%.1f,%.1f ", px, py)
				printf "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %s: %s</title></circle>\n", px, py, pal[(k - 1) % 8 + 1], esc(sname[k]), xname[i], fmt(v)
			}
			printf "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n", pts, pal[(k - 1) % 8 + 1]
		}
	}
	if (kind == "stack") {
		# x sorted numerically (insertion sort on indices)
		for (i = 1; i <= nx; i++) ord[i] = i
		for (i = 2; i <= nx; i++) for (j = i; j > 1 && xname[ord[j]] + 0 < xname[ord[j - 1]] + 0; j--) { t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t }
		for (i = 1; i <= nx; i++) base[i] = 0
		for (k = 1; k <= ns; k++) {
			up = ""; dn = ""
			for (i = 1; i <= nx; i++) {
				xi = ord[i]; v = has[k, xi] ? val[k, xi] : 0; if (v < 0) v = 0
				px = L + pw * (xname[xi] - xmin) / (xmax - xmin)
				lo = base[i]; hi = lo + v; base[i] = hi
				if (hi > top) hi = top; if (lo > top) lo = top
				up = up sprintf("%.1f,%.1f ", px, T + ph - ph * hi / top)
				dn = sprintf("%.1f,%.1f ", px, T + ph - ph * lo / top) dn
			}
			printf "<polygon points=\"%s%s\" fill=\"%s\" fill-opacity=\"0.85\" stroke=\"none\"><title>%s</title></polygon>\n", up, dn, pal[(k - 1) % 8 + 1], esc(sname[k])
		}
	}
	if (vlines != "" && kind != "bars") {
		nv = split(vlines, vl, ",")
		for (i = 1; i <= nv; i++) {
			px = L + pw * (vl[i] - xmin) / (xmax - xmin)
			printf "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\" stroke-dasharray=\"4,3\"/>\n", px, T, px, T + ph
		}
	}
	for (k = 1; k <= ns; k++) {
		ly = T + 10 + 18 * (k - 1)
		printf "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", L + pw + 12, ly - 10, pal[(k - 1) % 8 + 1]
		printf "<text x=\"%d\" y=\"%d\">%s</text>\n", L + pw + 30, ly, esc(sname[k])
	}
	print "</svg>"
}
