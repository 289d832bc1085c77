// Draws the vllmstat run report from the JSON in #data: charts of the step metrics, the chosen
// step's timelines and the table of steps. Plain DOM and SVG, no libraries, no network.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('data').textContent);
  var app = document.getElementById('app');
  var SVG = 'http://www.w3.org/2000/svg';
  var COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f',
    '#bcbd22', '#17becf', '#00488c', '#b05000', '#006e3c', '#96003c', '#5a3c96', '#646428'];
  // A statistic has one colour in every chart; split labels' values take the others in turn.
  var STAT_COLORS = { step: '#1f77b4', mean: '#ff7f0e', max: '#d62728', p50: '#2ca02c', p95: '#9467bd', p99: '#8c564b' };
  var OTHER_COLORS = ['#17becf', '#e377c2', '#bcbd22', '#7f7f7f', '#00488c', '#b05000', '#006e3c', '#96003c', '#5a3c96', '#646428'];
  // The engine time ledger's states have one colour each, in every chart: generating green,
  // idle orange (the time to win back), the sleep family in purples, undetermined (generating
  // or idle, SGLang's page could not tell) grey.
  var STATE_COLORS = { generating: '#2ca02c', idle: '#ff7f0e', asleep: '#9467bd', waking: '#c5b0d5', paused: '#bcbd22',
    loading_weights: '#1f77b4', unreachable: '#d62728', undetermined: '#aaaaaa', total: '#333' };
  // The policy version's lines: the trainer's dark, drawn over the engines' lowest and highest.
  var NAMED_COLORS = { trainer: '#111', "engines' min": '#9467bd', "engines' max": '#e377c2' };
  // The timelines' series by name: the spec's title and unit, in the spec's order.
  var SERIES = {};
  (D.series || []).forEach(function (x, i) { SERIES[x.name] = { title: x.title, unit: x.unit, frac: x.frac, rank: i }; });
  var MAX_LINES = 16;
  // How the step picker names a step's worst worker by each key of its record's worst_workers.
  var WORST = { prefix_cache_hit_rate: 'lowest prefix-cache hit rate', num_preemptions: 'most preemptions' };
  var W = 560, H = 220, M = { l: 58, r: 12, t: 10, b: 32 };

  function el(tag, attrs, parent, text) {
    var e = document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function sv(tag, attrs, parent) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) {
    if (v == null || isNaN(v)) return '–';
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e7 || a < 1e-3)) return v.toExponential(3);
    return String(+v.toPrecision(5));
  }
  function fmtTick(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toPrecision(4) + 'G';
    if (a >= 1e6) return +(v / 1e6).toPrecision(4) + 'M';
    if (a >= 1e4) return +(v / 1e3).toPrecision(4) + 'k';
    if (a > 0 && a < 1e-3) return +(v * 1e6).toPrecision(4) + 'µ';
    return fmt(v);
  }
  function shortKey(k) { var i = k.indexOf('/'); return i < 0 ? k : k.slice(i + 1); }
  function ticks(lo, hi, n, whole) {
    if (!(hi > lo)) { hi = lo + 1; }
    var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    var err = (hi - lo) / n / step;
    step *= err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1;
    if (whole) step = Math.max(step, 1);
    var out = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(12));
    return out;
  }

  // fracRange is the axis of fractions from lo to hi: zoomed to them with a margin, within
  // [0, 1] (unless a value is outside it), so that a hit rate of 93-95% is not a flat line at
  // the top of 0-1.
  function fracRange(lo, hi) {
    var pad = Math.max(0.15 * (hi - lo), 0.005);
    return [Math.min(lo, Math.max(0, lo - pad)), Math.max(hi, Math.min(1, hi + pad))];
  }

  // lineChart draws series over shared xs into parent and returns the svg. o: {xs, series:
  // [{name, ys, color, cls, width, dash, dots}], band: {lo, hi}, marks: [{x, label}], xLabel,
  // yLabel, yMax, frac, onPick}. With o.stepW, each value is a step held from xs[i] to xs[i] +
  // stepW (the timelines' grid). A mark is a labelled vertical line at x. o.frac zooms the y
  // axis of fractions to the values (fracRange). A series with dots (a phase that runs every
  // few steps) is drawn over the steps without a value, from each value to the next, and gets
  // a dot at each value without a value beside it, which marks the steps it has.
  function lineChart(parent, o) {
    var wrap = el('div', { 'class': 'chart-wrap' }, parent);
    var svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + H, 'class': 'chart ' + (o.cls || '') }, wrap);
    var xs = o.xs, x0 = xs.length ? xs[0] : 0, x1 = xs.length ? xs[xs.length - 1] : 1;
    if (o.xMin != null) x0 = o.xMin;
    if (o.xMax != null) x1 = o.xMax;
    if (!(x1 > x0)) x1 = x0 + 1;
    var y0 = Infinity, y1 = -Infinity;
    o.series.forEach(function (s) { s.ys.forEach(function (y) { if (y != null) { y0 = Math.min(y0, y); y1 = Math.max(y1, y); } }); });
    if (o.band) o.band.hi.forEach(function (y) { if (y != null) y1 = Math.max(y1, y); });
    if (!isFinite(y0)) { y0 = 0; y1 = 1; }
    if (o.frac) {
      var fr = fracRange(y0, y1);
      y0 = fr[0]; y1 = fr[1];
    } else {
      y0 = Math.min(0, y0);
      if (o.yMax != null && y1 <= o.yMax) y1 = o.yMax;
    }
    if (!(y1 > y0)) y1 = y0 + 1;
    var pw = W - M.l - M.r, ph = H - M.t - M.b;
    function X(x) { return M.l + (x - x0) / (x1 - x0) * pw; }
    function Y(y) { return M.t + ph - (y - y0) / (y1 - y0) * ph; }
    drawAxes(svg, X, Y, x0, x1, y0, y1, o);
    var sw = o.stepW || 0;
    function pt(x, y) { return X(x).toFixed(1) + ' ' + Y(y).toFixed(1); }
    if (o.band) {
      var pts = [];
      xs.forEach(function (x, i) { if (o.band.hi[i] != null) { pts.push(pt(x, o.band.hi[i])); if (sw) pts.push(pt(x + sw, o.band.hi[i])); } });
      for (var i = xs.length - 1; i >= 0; i--) if (o.band.lo[i] != null) { if (sw) pts.push(pt(xs[i] + sw, o.band.lo[i])); pts.push(pt(xs[i], o.band.lo[i])); }
      sv('polygon', { points: pts.join(' '), 'class': 'band' }, svg);
    }
    (o.marks || []).forEach(function (m) {
      if (!(m.x >= x0 && m.x <= x1)) return;
      sv('line', { x1: X(m.x), x2: X(m.x), y1: M.t, y2: M.t + ph, 'class': 'mark' }, svg);
      var right = X(m.x) > M.l + pw / 2;
      sv('text', { x: X(m.x) + (right ? -4 : 4), y: M.t + 11, 'text-anchor': right ? 'end' : 'start', 'class': 'mark-label' }, svg).textContent = m.label;
    });
    o.series.forEach(function (s) {
      var d = [], n = 0, pen = 'M', alone = [];
      s.ys.forEach(function (y, i) {
        if (y == null) { if (!s.dots) pen = 'M'; return; }
        if (s.dots && (i === 0 || s.ys[i - 1] == null) && (i + 1 >= s.ys.length || s.ys[i + 1] == null)) alone.push(i);
        d.push(pen + pt(xs[i], y));
        if (sw) d.push('L' + pt(xs[i] + sw, y));
        pen = 'L'; n++;
      });
      var p = sv('path', { d: d.join(''), 'class': s.cls || 'series', stroke: s.color, 'stroke-width': s.width || 1.5, 'data-key': s.name, 'data-n': n }, svg);
      if (s.dash) p.setAttribute('stroke-dasharray', s.dash);
      if (n === 1) sv('circle', { cx: d[0].slice(1).split(' ')[0], cy: d[0].split(' ')[1], r: 2.5, fill: s.color }, svg);
      else alone.forEach(function (i) { sv('circle', { cx: X(xs[i]).toFixed(1), cy: Y(s.ys[i]).toFixed(1), r: 2.5, fill: s.color, 'class': 'dot' }, svg); });
    });
    // Hover: the nearest x, its values in a tip.
    var cursor = sv('line', { y1: M.t, y2: M.t + ph, 'class': 'cursor', visibility: 'hidden' }, svg);
    var tip = el('div', { 'class': 'tip', hidden: '' }, wrap);
    var hit = sv('rect', { x: M.l, y: M.t, width: pw, height: ph, 'class': 'hit' }, svg);
    function nearest(ev) {
      var r = svg.getBoundingClientRect();
      var x = x0 + ((ev.clientX - r.left) / r.width * W - M.l) / pw * (x1 - x0) - sw / 2;
      var best = -1, bd = Infinity;
      for (var i = 0; i < xs.length; i++) { var dd = Math.abs(xs[i] - x); if (dd < bd) { bd = dd; best = i; } }
      return best;
    }
    hit.addEventListener('mousemove', function (ev) {
      var i = nearest(ev);
      if (i < 0) return;
      cursor.setAttribute('x1', X(xs[i] + sw / 2)); cursor.setAttribute('x2', X(xs[i] + sw / 2));
      cursor.setAttribute('visibility', 'visible');
      tip.textContent = '';
      el('div', { 'class': 'tip-head' }, tip, sw ? fmt(xs[i]) + '–' + fmt(xs[i] + sw) + ' s' : o.xLabel + ' ' + fmt(xs[i]));
      var rows = o.series.map(function (s) { return [s, s.ys[i]]; });
      if (o.band) rows.push([{ name: 'min', color: '#9db4dc' }, o.band.lo[i]], [{ name: 'max', color: '#9db4dc' }, o.band.hi[i]]);
      rows.slice(0, 24).forEach(function (row) { tipRow(tip, row[0].color, row[0].name + ': ' + fmt(row[1])); });
      showTip(wrap, tip, ev);
    });
    hit.addEventListener('mouseleave', function () { cursor.setAttribute('visibility', 'hidden'); tip.hidden = true; });
    if (o.onPick) hit.addEventListener('click', function (ev) { var i = nearest(ev); if (i >= 0) o.onPick(xs[i]); });
    return svg;
  }

  // drawAxes draws a chart's grid, ticks and labels for the scales X and Y over x0..x1 and
  // y0..y1; o gives the labels (o.xLabel 'step' ticks whole numbers).
  function drawAxes(svg, X, Y, x0, x1, y0, y1, o) {
    var pw = W - M.l - M.r, ph = H - M.t - M.b;
    var axes = sv('g', { 'class': 'axes' }, svg);
    ticks(y0, y1, 4).forEach(function (t) {
      sv('line', { x1: M.l, x2: W - M.r, y1: Y(t), y2: Y(t), 'class': 'grid' }, axes);
      sv('text', { x: M.l - 6, y: Y(t) + 4, 'text-anchor': 'end' }, axes).textContent = fmtTick(t);
    });
    ticks(x0, x1, 6, o.xLabel === 'step').forEach(function (t) {
      sv('line', { x1: X(t), x2: X(t), y1: M.t + ph, y2: M.t + ph + 4, 'class': 'tick' }, axes);
      sv('text', { x: X(t), y: H - M.b + 17, 'text-anchor': 'middle' }, axes).textContent = fmt(t);
    });
    sv('text', { x: M.l + pw / 2, y: H - 2, 'text-anchor': 'middle', 'class': 'label' }, axes).textContent = o.xLabel;
    if (o.yLabel) sv('text', { x: 10, y: M.t + ph / 2, transform: 'rotate(-90 10 ' + (M.t + ph / 2) + ')', 'text-anchor': 'middle', 'class': 'label' }, axes).textContent = o.yLabel;
  }

  // showTip shows a chart's tip beside the pointer, inside the chart.
  function showTip(wrap, tip, ev) {
    tip.hidden = false;
    var r = wrap.getBoundingClientRect();
    var left = ev.clientX - r.left + 14;
    tip.style.left = Math.min(left, r.width - tip.offsetWidth - 4) + 'px';
    tip.style.top = (ev.clientY - r.top + 10) + 'px';
  }
  function tipRow(tip, color, text) {
    var line = el('div', {}, tip);
    el('span', { 'class': 'swatch', style: 'background:' + color }, line);
    line.appendChild(document.createTextNode(text));
  }

  // stackChart draws, for each step, a bar of the layers' values stacked in the layers' order,
  // bottom up, and beside it a thin bar for each further bar of o.bars (a phase), stacked of
  // the phase's values. o: {xs, bars: ['', phase...], layers: [{name, color, ys: {bar:
  // values}}], totals: {bar: values}, xLabel, yLabel, onPick}. A layer is one path of
  // rectangles per bar; a value that is null or 0 draws nothing.
  function stackChart(parent, o) {
    var wrap = el('div', { 'class': 'chart-wrap' }, parent);
    var svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + H, 'class': 'chart stacked' }, wrap);
    var xs = o.xs, n = xs.length, gap = Infinity;
    for (var i = 1; i < n; i++) gap = Math.min(gap, xs[i] - xs[i - 1]);
    if (!(gap > 0 && isFinite(gap))) gap = 1;
    var x0 = n ? xs[0] - gap / 2 : 0, x1 = n ? xs[n - 1] + gap / 2 : 1, y1 = 0;
    o.bars.forEach(function (b) {
      var tot = o.totals[b] || [];
      xs.forEach(function (x, i) {
        var sum = 0;
        o.layers.forEach(function (l) { var y = l.ys[b] && l.ys[b][i]; if (y > 0) sum += y; });
        y1 = Math.max(y1, sum, tot[i] > 0 ? tot[i] : 0);
      });
    });
    if (!(y1 > 0)) y1 = 1;
    var pw = W - M.l - M.r, ph = H - M.t - M.b;
    function X(x) { return M.l + (x - x0) / (x1 - x0) * pw; }
    function Y(y) { return M.t + ph - y / y1 * ph; }
    drawAxes(svg, X, Y, x0, x1, 0, y1, o);
    // In a step's slot: the whole step's bar, then each phase's thin bar, a little apart.
    var nb = o.bars.length, slot = 0.86 * gap, sep = nb > 1 ? 0.04 * slot : 0;
    var wide = nb > 1 ? 0.5 * slot : slot, thin = nb > 1 ? (slot - wide - sep * (nb - 1)) / (nb - 1) : 0;
    o.bars.forEach(function (b, bi) {
      var base = xs.map(function () { return 0; });
      var off = bi ? wide + bi * sep + (bi - 1) * thin : 0, w = bi ? thin : wide;
      o.layers.forEach(function (l) {
        var ys = l.ys[b], d = [], cnt = 0;
        if (!ys) return;
        ys.forEach(function (y, i) {
          if (!(y > 0)) return;
          var lx = X(xs[i] - slot / 2 + off).toFixed(1), rx = X(xs[i] - slot / 2 + off + w).toFixed(1);
          d.push('M' + lx + ' ' + Y(base[i] + y).toFixed(1) + 'H' + rx + 'V' + Y(base[i]).toFixed(1) + 'H' + lx + 'Z');
          base[i] += y; cnt++;
        });
        sv('path', { d: d.join(''), 'class': bi ? 'stack phase' : 'stack', style: 'fill:' + l.color, 'data-key': l.name, 'data-bar': b, 'data-n': cnt }, svg);
      });
    });
    var tip = el('div', { 'class': 'tip', hidden: '' }, wrap);
    var hit = sv('rect', { x: M.l, y: M.t, width: pw, height: ph, 'class': 'hit' }, svg);
    function nearest(ev) {
      var r = svg.getBoundingClientRect();
      var x = x0 + ((ev.clientX - r.left) / r.width * W - M.l) / pw * (x1 - x0);
      var best = -1, bd = Infinity;
      for (var i = 0; i < n; i++) { var dd = Math.abs(xs[i] - x); if (dd < bd) { bd = dd; best = i; } }
      return best;
    }
    // The tip: a line per layer with the whole step's value and share, then each phase's.
    hit.addEventListener('mousemove', function (ev) {
      var i = nearest(ev);
      if (i < 0) return;
      tip.textContent = '';
      function total(b) {
        var t = o.totals[b] && o.totals[b][i];
        if (t != null) return t;
        var sum = null;
        o.layers.forEach(function (l) { var y = l.ys[b] && l.ys[b][i]; if (y != null) sum = (sum || 0) + y; });
        return sum;
      }
      var whole = total(o.bars[0]);
      el('div', { 'class': 'tip-head' }, tip, o.xLabel + ' ' + fmt(xs[i]) + ' · ' + fmt(whole) + ' ' + o.unit);
      o.layers.forEach(function (l) {
        var parts = [];
        o.bars.forEach(function (b, bi) {
          var y = l.ys[b] ? l.ys[b][i] : null;
          if (!bi) parts.push(fmt(y) + (whole > 0 && y != null ? ' (' + Math.round(100 * y / whole) + '%)' : ''));
          else if (y != null) parts.push(b + ' ' + fmt(y));
        });
        tipRow(tip, l.color, l.name + ': ' + parts.join(' · '));
      });
      var phases = o.bars.slice(1).filter(function (b) { return total(b) != null; });
      if (phases.length) el('div', {}, tip, phases.map(function (b) { return b + ' ' + fmt(total(b)); }).join(' · ') + ' ' + o.unit);
      showTip(wrap, tip, ev);
    });
    hit.addEventListener('mouseleave', function () { tip.hidden = true; });
    if (o.onPick) hit.addEventListener('click', function (ev) { var i = nearest(ev); if (i >= 0) o.onPick(xs[i]); });
    return svg;
  }

  // legend names items by their colour, or, for an item with a lineStyle (a dash array, '' for
  // solid), by a short line drawn in that style; what is the legend's data-legend.
  function legend(parent, items, what) {
    var l = el('div', what ? { 'class': 'legend', 'data-legend': what } : { 'class': 'legend' }, parent);
    items.forEach(function (it) {
      var s = el('span', it.lineStyle != null ? { 'class': 'style-item' } : {}, l);
      if (it.lineStyle != null) {
        var line = sv('line', { x1: 0, y1: 4, x2: 22, y2: 4, stroke: '#444', 'stroke-width': 2 }, sv('svg', { width: 22, height: 8, 'class': 'style-swatch' }, s));
        if (it.lineStyle) line.setAttribute('stroke-dasharray', it.lineStyle);
      } else {
        el('span', { 'class': 'swatch' + (it.band ? ' band-swatch' : ''), style: 'background:' + it.color }, s);
      }
      s.appendChild(document.createTextNode(it.name));
    });
  }

  // A phase's lines have the colour of the whole step's line of the same figure and the
  // phase's dash: the rollout's dashed, the next phase's dotted.
  var DASHES = ['6 3', '1.5 2.5', '8 3 2 3', '3 3'];
  function dashOf(phase) { var i = P.findIndex(function (p) { return p.name === phase; }); return DASHES[Math.max(i, 0) % DASHES.length]; }
  // phaseLegend names a chart's lines whose phases have lines in it in two legends: its figures
  // by colour (unless the chart has one, the step's), then below, apart, the whole step's and
  // each phase's line style, which any colour may have.
  function phaseLegend(parent, series) {
    var figures = [], phases = [];
    series.forEach(function (x) {
      if (x.phase && phases.indexOf(x.phase) < 0) phases.push(x.phase);
      if (!figures.some(function (f) { return f.name === x.stat; })) figures.push({ name: x.stat, color: x.color });
    });
    if (figures.length > 1 || (figures.length === 1 && figures[0].name !== 'step')) legend(parent, figures, 'figures');
    legend(parent, [{ name: 'whole step', lineStyle: '' }].concat(P.filter(function (p) { return phases.indexOf(p.name) >= 0; }).map(function (p) {
      return { name: p.name, lineStyle: dashOf(p.name) };
    })), 'phases');
  }

  // spark draws the steps' values of a headline figure small, a line each (the first lighter),
  // without axes: its shape over the run. Fractions are drawn on an axis zoomed to them
  // (fracRange), which a line below the spark labels.
  function spark(parent, lines, frac) {
    var w = 160, h = 30, lo = Infinity, hi = -Infinity;
    lines.forEach(function (ys) { ys.forEach(function (y) { if (y != null) { lo = Math.min(lo, y); hi = Math.max(hi, y); } }); });
    if (!isFinite(lo)) return;
    if (frac) { var fr = fracRange(lo, hi); lo = fr[0]; hi = fr[1]; }
    else lo = Math.min(lo, 0);
    if (!(hi > lo)) hi = lo + 1;
    var svg = sv('svg', { viewBox: '0 0 ' + w + ' ' + h, 'class': 'spark', preserveAspectRatio: 'none' }, parent);
    lines.forEach(function (ys, li) {
      var d = [], pen = 'M';
      ys.forEach(function (y, i) {
        if (y == null) { pen = 'M'; return; }
        var x = n > 1 ? i / (n - 1) * (w - 4) + 2 : w / 2;
        d.push(pen + x.toFixed(1) + ' ' + (h - 2 - (y - lo) / (hi - lo) * (h - 4)).toFixed(1));
        pen = 'L';
      });
      sv('path', { d: d.join(''), stroke: lines.length > 1 && li === 0 ? '#8fb3d9' : '#1f77b4', 'stroke-width': 1.5, 'vector-effect': 'non-scaling-stroke' }, svg);
    });
    if (frac) el('div', { 'class': 'spark-axis' }, parent, 'axis ' + +(100 * lo).toFixed(1) + '–' + +(100 * hi).toFixed(1) + '%');
  }

  // Summary and notes.
  var n = D.steps.length;
  document.getElementById('summary').textContent = n + ' steps' +
    (n ? ' (' + D.steps[0] + '–' + D.steps[n - 1] + ', from ' + D.start[0] + ')' : '') +
    ' · ' + D.keys.length + ' metrics · ' + D.timelineFiles + (D.timelineFiles === 1 ? ' timeline file' : ' timeline files') + ' · built ' + D.generated +
    (D.refresh ? ' · reloads every ' + D.refresh + ' s' : '');
  // The headline: the run at a glance, each figure with what it is over and its steps' values.
  if (D.headline.length) {
    var head = el('section', { id: 'headline', 'class': 'headline' }, app);
    D.headline.forEach(function (t) {
      var tile = el('div', { 'class': 'tile', 'data-tile': t.id }, head);
      el('div', { 'class': 'tile-label' }, tile, t.label);
      el('div', { 'class': 'tile-value' }, tile, t.value);
      if (t.sub) el('div', { 'class': 'tile-sub' }, tile, t.sub);
      if (t.spark && n > 1) spark(tile, t.spark, t.frac);
    });
  }
  D.notes.forEach(function (t) { el('p', { 'class': 'note' }, app, t); });

  // Phases: each key's phase ('' for the whole step's keys) and the whole step's key that it is
  // the phase's value of; keyAt finds a key by the two. Phase names and keys are data: they
  // reach the page as text only.
  var P = D.phases || [], KP = D.keyPhase || [], KO = D.keyOf || D.keys;
  var keyIndex = new Map();
  D.keys.forEach(function (k, i) { keyIndex.set((KP[i] || '') + '\u0000' + shortKey(KO[i]), i); });
  function keyAt(phase, name) { var i = keyIndex.get(phase + '\u0000' + name); return i == null ? -1 : i; }

  var current = null;
  function pick(step) { showStep(step); }

  // statOf names key k in chart c: the name the chart gives it (a ledger's state), else its
  // statistic or split label's value, 'step' for the chart's plain key.
  function statOf(c, k) {
    if (c.names && c.names[KO[k]] != null) return c.names[KO[k]];
    var name = shortKey(KO[k]), base = c.id.replace(/ per interval$/, '');
    return name.indexOf(base + '/') === 0 ? name.slice(base.length + 1) : name === base ? 'step' : name;
  }
  // lineName names key k's line in chart c: its statistic, after its phase for a phase's key
  // ("rollout", "rollout mean").
  function lineName(c, k) {
    var stat = statOf(c, k);
    return KP[k] ? KP[k] + (stat === 'step' ? '' : ' ' + stat) : stat;
  }
  // caption heads a chart with its title and, in small, the key it draws (the key's name in
  // steps.jsonl and the trackers, without prefix and statistic).
  function caption(fig, title, id) {
    var cap = el('figcaption', {}, fig, title);
    if (id && id !== title) el('span', { 'class': 'chart-key' }, cap, id);
  }

  // Step metrics, grouped.
  var metrics = el('section', { id: 'metrics' }, app);
  el('h2', {}, metrics, 'Step metrics');
  if (!n) el('p', { 'class': 'note' }, metrics, 'No steps yet.');
  // The keys that are 0 in every step: one line, instead of flat charts.
  if (D.zero.length) {
    var zl = el('p', { id: 'always-zero', 'class': 'zero' }, metrics);
    el('strong', {}, zl, 'Always zero');
    zl.appendChild(document.createTextNode(' in every step, not charted: '));
    D.zero.forEach(function (c, i) {
      // The lines by their statistic or label; a phase's key is said with the whole step's.
      var names = [];
      c.keys.forEach(function (k) {
        if (KP[k] && c.keys.some(function (j) { return !KP[j] && KO[j] === KO[k]; })) return;
        var x = KP[k] ? lineName(c, k) : statOf(c, k);
        if (names.indexOf(x) < 0) names.push(x);
      });
      var text = c.title + (names.length === 1 && names[0] === 'step' ? '' : ' (' + names.join(', ') + ')');
      if (i) zl.appendChild(document.createTextNode(' · '));
      el('span', { 'data-chart': c.id, title: c.keys.map(function (k) { return D.keys[k]; }).join('\n') }, zl, text);
    });
  }
  // The phases' time beside the whole step's.
  if (P.length) {
    el('h3', {}, metrics, 'Phases');
    var pfig = el('figure', { 'data-chart': 'duration_s' }, el('div', { 'class': 'grid' }, metrics));
    caption(pfig, 'Step and phase time', 'duration_s');
    var durs = [{ name: 'step', stat: 'step', ys: D.dur, color: STAT_COLORS.step }].concat(P.map(function (p) {
      return { name: p.name, stat: 'step', phase: p.name, ys: p.dur, color: STAT_COLORS.step, cls: 'series phase', dots: true, dash: dashOf(p.name) };
    }));
    lineChart(pfig, { xs: D.steps, series: durs, xLabel: 'step', yLabel: 'seconds', onPick: pick });
    phaseLegend(pfig, durs);
  }
  D.groups.forEach(function (g) {
    el('h3', {}, metrics, g.name);
    var grid = el('div', { 'class': 'grid' }, metrics);
    g.charts.forEach(function (c) {
      var fig = el('figure', { 'data-chart': c.id }, grid);
      caption(fig, c.title, c.id);
      if (c.kind === 'stack' || c.kind === 'split') { ledgerChart(fig, c); return; }
      var others = [];
      var series = c.keys.map(function (k) {
        var stat = statOf(c, k), color = c.kind === 'states' ? STATE_COLORS[stat] : STAT_COLORS[stat] || NAMED_COLORS[stat];
        if (!color) {
          var i = others.indexOf(stat);
          if (i < 0) { i = others.length; others.push(stat); }
          color = OTHER_COLORS[i % OTHER_COLORS.length];
        }
        var x = { name: stat, stat: stat, key: D.keys[k], ys: D.values[k], color: color };
        if (KP[k]) {
          x.name = lineName(c, k);
          x.phase = KP[k]; x.cls = 'series phase'; x.dots = true; x.dash = dashOf(KP[k]);
        }
        return x;
      });
      lineChart(fig, { xs: D.steps, series: series, xLabel: 'step', yLabel: c.unit || '', frac: c.frac, onPick: pick });
      if (series.some(function (x) { return x.phase; })) phaseLegend(fig, series);
      else legend(fig, series);
    });
  });

  // ledgerChart draws chart c of the engine time ledger: the step's engine-seconds stacked by
  // state, a thin bar beside it for each phase, the states named by colour in a fixed order
  // and the bars left to right below them.
  function ledgerChart(fig, c) {
    var layers = [], byName = {}, totals = {}, bars = [''];
    c.keys.forEach(function (k) {
      var state = statOf(c, k), bar = KP[k] || '';
      if (bar && bars.indexOf(bar) < 0) bars.push(bar);
      if (state === 'total') { totals[bar] = D.values[k]; return; }
      var l = byName[state];
      if (!l) {
        l = byName[state] = { name: state, ys: {}, color: STATE_COLORS[state] || OTHER_COLORS[layers.length % OTHER_COLORS.length] };
        layers.push(l);
      }
      l.ys[bar] = D.values[k];
    });
    // The phases in the page's order: the rollout first.
    bars = [''].concat(P.map(function (p) { return p.name; }).filter(function (p) { return bars.indexOf(p) >= 0; }));
    stackChart(fig, { xs: D.steps, bars: bars, layers: layers, totals: totals, xLabel: 'step', yLabel: c.unit || '', unit: c.kind === 'split' ? 'tokens' : 'engine-s', onPick: pick });
    var l = el('div', { 'class': 'legend' }, fig);
    layers.forEach(function (x) {
      var s = el('span', { 'data-state': x.name }, l);
      el('span', { 'class': 'swatch block', style: 'background:' + x.color }, s);
      s.appendChild(document.createTextNode(x.name));
    });
    if (bars.length > 1) el('div', { 'class': 'stack-key' }, fig, 'Bars of a step, left to right: the whole step, then ' + bars.slice(1).join(', ') + ' (thin)');
  }

  // Timelines of the chosen step.
  var tls = el('section', { id: 'timelines-section' }, app);
  el('h2', {}, tls, 'Step timelines');
  var bar = el('div', { 'class': 'picker' }, tls);
  el('label', { 'for': 'step-picker' }, bar, 'Step ');
  var prev = el('button', { type: 'button', id: 'prev-step' }, bar, '◀');
  var picker = el('select', { id: 'step-picker' }, bar);
  var next = el('button', { type: 'button', id: 'next-step' }, bar, '▶');
  var withTimeline = D.steps.filter(function (s) { return D.timelines[s]; });
  D.steps.forEach(function (s) { el('option', { value: s }, picker, 'step ' + s + (D.timelines[s] ? '' : ' (no timeline)')); });
  picker.addEventListener('change', function () { showStep(+picker.value); });
  prev.addEventListener('click', function () { move(-1); });
  next.addEventListener('click', function () { move(1); });
  function move(d) { var i = D.steps.indexOf(current) + d; if (i >= 0 && i < n) showStep(D.steps[i]); }
  var view = el('div', { id: 'timelines' }, tls);
  if (!withTimeline.length) {
    el('p', { id: 'no-timelines', 'class': 'note' }, tls, 'This run has no timelines: they are written to timelines/step_NNNNNN.json when vllm_metrics_log_timeline_plots or record_timelines is on.');
  }

  function decode(b64) {
    var s = atob(b64), a = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return a;
  }
  function row(q, off, cols, max) {
    var out = new Array(cols);
    for (var c = 0; c < cols; c++) { var v = q[off + c]; out[c] = v === 255 ? null : v / 254 * max; }
    return out;
  }
  function heatmap(parent, q, workers, cols, labels, max) {
    var h = Math.max(40, Math.min(workers.length * 3, 320));
    var fig = el('div', { 'class': 'heat' }, parent);
    el('div', { 'class': 'heat-label' }, fig, 'Per worker (a row each, ' + workers.length + ' rows; darker is higher, grey is no sample)');
    var cv = el('canvas', { width: cols, height: workers.length, 'class': 'heatmap', style: 'height:' + h + 'px' }, fig);
    var ctx = cv.getContext('2d'), img = ctx.createImageData(cols, workers.length);
    for (var i = 0; i < q.length; i++) {
      var v = q[i], p = i * 4;
      if (v === 255) { img.data[p] = img.data[p + 1] = img.data[p + 2] = 225; }
      else { var t = v / 254; img.data[p] = 247 - 239 * t; img.data[p + 1] = 251 - 203 * t; img.data[p + 2] = 255 - 148 * t; }
      img.data[p + 3] = 255;
    }
    ctx.putImageData(img, 0, 0);
    cv.addEventListener('mousemove', function (ev) {
      var r = cv.getBoundingClientRect();
      var c = Math.floor((ev.clientX - r.left) / r.width * cols), w = Math.floor((ev.clientY - r.top) / r.height * workers.length);
      var v = q[w * cols + c];
      cv.title = labels[w] + ': ' + (v === 255 ? 'no sample' : fmt(v / 254 * max));
    });
  }

  // balanceNotes says which workers of a step straggled and which were worst by some key, as
  // the step's record names them.
  // A worker's colour: its own in every chart of every step (the page's order of all workers).
  function workerColor(t, w) { var c = t && t.colors ? t.colors[w] : w; return COLORS[(c == null ? w : c) % COLORS.length]; }

  function balanceNotes(parent, b, t) {
    var st = b.stragglers || [], worst = b.worst || [];
    // who names a worker, after a swatch of its colour when the step's timeline has it.
    function who(p, x) {
      if (t && x.w >= 0) el('span', { 'class': 'swatch', style: 'background:' + workerColor(t, x.w) }, p);
      p.appendChild(document.createTextNode(x.label));
    }
    if (st.length) {
      var sp = el('p', { 'class': 'balance-note', id: 'straggler-note' }, parent, st.length > 1 ? 'stragglers: ' : 'straggler: ');
      st.forEach(function (x, i) {
        if (i) sp.appendChild(document.createTextNode('; '));
        who(sp, x);
        if (x.value != null) sp.appendChild(document.createTextNode(', last busy ' + fmt(x.value) + ' s'));
      });
    }
    if (worst.length) {
      var wp = el('p', { 'class': 'worst-note', id: 'worst-note' }, parent);
      worst.forEach(function (x, i) {
        wp.appendChild(document.createTextNode((i ? ' · ' : '') + (WORST[x.what] || 'worst by ' + x.what) + ': '));
        who(wp, x);
        if (x.value != null) wp.appendChild(document.createTextNode(' (' + fmt(x.value) + ')'));
      });
    }
  }

  // phaseTable shows the phases of step s below the whole step: each one's time, its share of
  // the step's, how many times it was open and its figures; nothing for a step without phases.
  function phaseTable(parent, s) {
    var j = D.steps.indexOf(s);
    var rows = [{ name: 'whole step', phase: '', dur: D.dur[j], runs: null }];
    P.forEach(function (p) { if (p.dur[j] != null) rows.push({ name: p.name, phase: p.name, dur: p.dur[j], runs: p.runs[j] }); });
    if (rows.length < 2) return;
    function val(phase, f) { var k = keyAt(phase, f.key); return k < 0 ? null : D.values[k][j]; }
    var figs = (D.phaseFigures || []).filter(function (f) { return rows.some(function (r) { return val(r.phase, f) != null; }); });
    var table = el('table', { id: 'phase-table', 'class': 'phase-table' }, parent);
    el('caption', {}, table, 'Phases of step ' + s);
    var hr = el('tr', {}, el('thead', {}, table));
    ['phase', 'seconds', 'of step', 'open'].forEach(function (h) { el('th', {}, hr, h); });
    figs.forEach(function (f) { el('th', { title: f.key }, hr, f.label); });
    var tb = el('tbody', {}, table);
    rows.forEach(function (r) {
      var tr = el('tr', { 'data-phase': r.phase }, tb);
      el('td', {}, tr, r.name);
      el('td', {}, tr, fmt(r.dur));
      el('td', {}, tr, D.dur[j] > 0 && r.dur != null ? Math.round(100 * r.dur / D.dur[j]) + '%' : '–');
      el('td', {}, tr, r.runs == null ? '' : r.runs === 1 ? 'once' : r.runs + ' times');
      figs.forEach(function (f) { el('td', {}, tr, fmt(val(r.phase, f))); });
    });
  }

  function showStep(s) {
    current = s;
    picker.value = String(s);
    view.textContent = '';
    view.setAttribute('data-step', s);
    var rows = document.querySelectorAll('#steps-table tbody tr');
    for (var i = 0; i < rows.length; i++) rows[i].classList.toggle('selected', +rows[i].getAttribute('data-step') === s);
    if (history.replaceState) history.replaceState(null, '', '#step=' + s);
    var t = D.timelines[s], bal = D.balance && D.balance[s];
    if (!t) {
      phaseTable(view, s);
      if (bal) balanceNotes(view, bal, null);
      if (withTimeline.length) el('p', { 'class': 'note' }, view, 'Step ' + s + ' has no timeline in this report' + (D.timelineFiles ? ' (see timelines/step_NNNNNN.json).' : '.'));
      return;
    }
    el('p', { 'class': 'step-head' }, view, 'Step ' + s + ' · ' + fmt(t.dur) + ' s · ' + t.workers.length + ' workers');
    phaseTable(view, s);
    // The stragglers' lines stand out, the others fade, and a line marks when each straggler
    // was last busy.
    var strag = {}, anyStrag = false, marks = [];
    if (bal) {
      balanceNotes(view, bal, t);
      (bal.stragglers || []).forEach(function (x) {
        if (x.w >= 0 && x.w < t.workers.length) { strag[x.w] = x; anyStrag = true; }
        if (x.value != null) marks.push({ x: x.value, label: 'last busy: ' + x.label });
      });
    }
    var names = Object.keys(t.series).sort(function (a, b) {
      var ia = SERIES[a] ? SERIES[a].rank : 1e9, ib = SERIES[b] ? SERIES[b].rank : 1e9;
      return ia - ib || (a < b ? -1 : a > b ? 1 : 0);
    });
    var grid = el('div', { 'class': 'grid' }, view);
    var xs = [];
    for (var c = 0; c < t.cols; c++) xs.push(c * t.dur / t.cols);
    names.forEach(function (name) {
      var sd = t.series[name], cols = t.cols, max = sd.max, info = SERIES[name] || { title: name, unit: 'per interval' };
      var fig = el('figure', { 'data-series': name }, grid);
      caption(fig, info.title, name);
      var b = decode(sd.band);
      var lo = row(b, 0, cols, max), hi = row(b, cols, cols, max), mean = row(b, 2 * cols, cols, max), p95 = row(b, 3 * cols, cols, max);
      var opts = { xs: xs, stepW: t.dur / t.cols, xMin: 0, xMax: t.dur, xLabel: 'seconds since step start', yLabel: info.unit, yMax: info.frac ? 1 : null, cls: 'timeline', marks: marks };
      var items;
      if (sd.w && t.workers.length <= MAX_LINES) {
        var q = decode(sd.w);
        opts.series = t.workers.map(function (label, w) {
          var st = strag[w];
          return { name: label + (st ? ' (straggler)' : ''), ys: row(q, w * cols, cols, max), color: workerColor(t, w),
            cls: st ? 'worker straggler' : anyStrag ? 'worker dim' : 'worker', width: st ? 3 : 1.2 };
        });
        // Stragglers drawn last, over the other workers.
        opts.series = opts.series.filter(function (x, w) { return !strag[w]; }).concat(opts.series.filter(function (x, w) { return strag[w]; }));
        if (t.workers.length > 1) opts.series.push({ name: 'fleet mean', ys: mean, color: '#000', cls: 'mean', width: 2.5 });
        items = opts.series;
      } else {
        opts.band = { lo: lo, hi: hi };
        opts.series = [{ name: 'fleet p95', ys: p95, color: '#d62728', cls: 'p95', width: 1.5, dash: '5 3' },
          { name: 'fleet mean', ys: mean, color: '#000', cls: 'mean', width: 2.5 }];
        if (sd.w) {
          var qs = decode(sd.w);
          Object.keys(strag).forEach(function (w) {
            opts.series.push({ name: t.workers[w] + ' (straggler)', ys: row(qs, w * cols, cols, max), color: workerColor(t, +w), cls: 'straggler', width: 2.2 });
          });
        }
        items = [{ name: 'min–max of ' + t.workers.length, color: '#c4d3ec', band: true }].concat(opts.series);
      }
      lineChart(fig, opts);
      legend(fig, items.length > MAX_LINES + 1 ? items.slice(0, MAX_LINES + 1) : items);
      if (sd.w && t.workers.length > MAX_LINES) heatmap(fig, decode(sd.w), t.workers, cols, t.workers, max);
    });
  }

  // The table of all steps.
  var ts = el('section', { id: 'table-section' }, app);
  el('h2', {}, ts, 'All steps');
  var scroll = el('div', { 'class': 'table-scroll' }, ts);
  var table = el('table', { id: 'steps-table' }, scroll);
  // Its columns are grouped as the charts are, in their order: a row of groups, a row of
  // charts, a row of each chart's lines; the keys that are always zero last.
  var thead = el('thead', {}, table);
  var hg = el('tr', { 'class': 'groups' }, thead), hc = el('tr', { 'class': 'charts' }, thead), hs = el('tr', { 'class': 'stats' }, thead);
  var fixed = ['step', 'start', 'duration s', 'workers', 'scrapes ok', 'failed'].concat(P.map(function (p) { return p.name + ' s'; }));
  el('th', { colspan: fixed.length, 'class': 'g-start' }, hg, 'Step');
  fixed.forEach(function (h) { el('th', { rowspan: 2, 'class': 'fixed' }, hc, h); });
  var cols = [];
  function columns(name, charts, cls) {
    var width = charts.reduce(function (a, c) { return a + c.keys.length; }, 0);
    if (!width) return;
    el('th', { colspan: width, 'class': 'g-start ' + cls }, hg, name);
    charts.forEach(function (c, ci) {
      el('th', { colspan: c.keys.length, title: c.id, 'class': ci ? '' : 'g-start' }, hc, c.title);
      c.keys.forEach(function (k, i) {
        el('th', { title: D.keys[k], 'data-key': D.keys[k], 'class': ci || i ? '' : 'g-start' }, hs, lineName(c, k));
        cols.push({ k: k, start: !ci && !i });
      });
    });
  }
  D.groups.forEach(function (g) { columns(g.name, g.charts, ''); });
  columns('Always zero', D.zero, 'zero');
  var tb = el('tbody', {}, table), frag = document.createDocumentFragment();
  D.steps.forEach(function (s, j) {
    var tr = el('tr', { 'data-step': s }, frag);
    [s, D.start[j].replace('T', ' ').replace('Z', ''), fmt(D.dur[j]), D.workers[j], D.ok[j], D.failed[j]].forEach(function (v) { el('td', {}, tr, v); });
    P.forEach(function (p) { el('td', {}, tr, fmt(p.dur[j])); });
    for (var c = 0; c < cols.length; c++) el('td', cols[c].start ? { 'class': 'g-start' } : {}, tr, fmt(D.values[cols[c].k][j]));
  });
  tb.appendChild(frag);
  tb.addEventListener('click', function (ev) {
    var tr = ev.target.closest('tr');
    if (tr) { showStep(+tr.getAttribute('data-step')); tls.scrollIntoView(); }
  });

  var m = /step=(\d+)/.exec(location.hash);
  // The page opens on the step its address names, else on the last step, with or without a
  // timeline (a run resumed without timelines after one with them still opens on its latest).
  var first = m && D.steps.indexOf(+m[1]) >= 0 ? +m[1] : D.steps[n - 1];
  if (first != null) showStep(first);
  if (D.refresh > 0) setTimeout(function () { location.reload(); }, D.refresh * 1000);
})();
