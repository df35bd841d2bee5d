// The report page's chart: hover a dot for its figures, click to pin them with its advice,
// toggle roofs in the legend, switch between the dots' range and the full range. Labels were
// placed apart in Rust with the bundled font's metrics; refine() re-checks them with the
// browser's own text boxes after every change and hides a label that would touch a label
// of higher priority or an axis label, so no two visible texts ever overlap.
(function () {
  "use strict";
  function all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function overlap(a, b) {
    return Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 &&
      Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  }
  function frameOf(svg) {
    return all("g.frame", svg).filter(function (g) { return g.style.display !== "none"; })[0];
  }
  function refine(svg) {
    var frame = frameOf(svg);
    if (!frame) return;
    var kept = [];
    all(".ticks text", frame).forEach(function (t) { kept.push(t.getBoundingClientRect()); });
    var labels = all("text.lbl", frame);
    labels.forEach(function (l) { l.classList.remove("clash"); });
    labels.sort(function (a, b) { return a.getAttribute("data-prio") - b.getAttribute("data-prio"); });
    labels.forEach(function (l) {
      if (l.style.display === "none") return;
      var r = l.getBoundingClientRect();
      if (r.width === 0) return;
      for (var i = 0; i < kept.length; i++) {
        if (overlap(r, kept[i])) { l.classList.add("clash"); return; }
      }
      kept.push(r);
    });
  }
  function rows(dl, pairs) {
    pairs.forEach(function (kv) {
      dl.appendChild(el("dt", "", kv[0]));
      dl.appendChild(el("dd", "", kv[1]));
    });
  }
  function list(parent, title, items, cls) {
    if (!items || !items.length) return;
    parent.appendChild(el("h4", "", title));
    var ul = el("ul", cls || "");
    items.forEach(function (t) { ul.appendChild(el("li", "", t)); });
    parent.appendChild(ul);
  }
  function table(parent, title, items) {
    if (!items || !items.length) return;
    parent.appendChild(el("h4", "", title));
    var t = el("table", "hot");
    items.forEach(function (r) {
      var tr = el("tr");
      tr.appendChild(el("td", "", r[0]));
      tr.appendChild(el("td", "", r[1]));
      t.appendChild(tr);
    });
    parent.appendChild(t);
  }
  // A chart's data, read once (by its chart, or by the advice cards for a chart not drawn).
  var parsed = {};
  function docOf(id) {
    if (!parsed[id]) {
      var doc = JSON.parse(document.getElementById(id + "-data").textContent);
      doc.dots.forEach(function (d) {
        [d.tip, d.more].forEach(function (rows) { rows.forEach(function (kv) { kv[0] = doc.keys[kv[0]]; }); });
      });
      parsed[id] = doc;
    }
    return parsed[id];
  }
  // Every chart's id in page order, drawn or not.
  function chartIds() {
    var seen = {}, ids = [];
    all(".chartbox svg.chart, section.later").forEach(function (e) {
      var id = e.getAttribute("data-chart") || e.id;
      if (!seen[id]) { seen[id] = true; ids.push(id); }
    });
    return ids;
  }
  function setup(box) {
    var svg = box.querySelector("svg.chart");
    var doc = docOf(svg.id);
    var data = doc.dots;
    var wrap = box.querySelector(".chart-wrap");
    var tip = box.querySelector(".tip");
    var pin = box.querySelector(".pin");
    var pinned = -1;
    function showTip(i, ev) {
      var d = data[i];
      tip.textContent = "";
      tip.appendChild(el("b", "", d.n));
      var dl = el("dl", "kv");
      rows(dl, d.tip);
      tip.appendChild(dl);
      tip.appendChild(el("div", "muted", "click to pin"));
      tip.hidden = false;
      var w = wrap.getBoundingClientRect();
      var x = ev.clientX - w.left + 14, y = ev.clientY - w.top + 14;
      var tw = tip.offsetWidth, th = tip.offsetHeight;
      if (x + tw > w.width) x = Math.max(0, ev.clientX - w.left - tw - 14);
      if (y + th > w.height) y = Math.max(0, ev.clientY - w.top - th - 14);
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    }
    function mark(i, on) {
      all('.dot[data-i="' + i + '"]', svg).forEach(function (c) { c.classList.toggle("pinned", on); });
    }
    function pinDot(i) {
      if (pinned >= 0) mark(pinned, false);
      pinned = i;
      pin.textContent = "";
      if (i < 0) { pin.hidden = true; return; }
      mark(i, true);
      var d = data[i];
      var close = el("button", "close", "×");
      close.type = "button";
      close.title = "unpin";
      close.addEventListener("click", function () { pinDot(-1); });
      pin.appendChild(close);
      pin.appendChild(el("h3", "", d.n));
      pin.appendChild(el("p", "bound " + d.bc, d.b));
      if (d.warn) pin.appendChild(el("p", "warn", d.warn));
      var dl = el("dl", "kv");
      rows(dl, d.tip.concat(d.more));
      pin.appendChild(dl);
      list(pin, "Advice", d.adv, "adv");
      table(pin, "Hottest functions (share of W)", d.fns);
      table(pin, "Hottest lines (share of W)", d.lines);
      list(pin, "Notes", d.notes.map(function (k) { return doc.notes[k]; }), "muted");
      pin.hidden = false;
    }
    function dotIndex(t) {
      var i = t && t.getAttribute && t.getAttribute("data-i");
      return i === null || i === undefined ? -1 : +i;
    }
    svg.addEventListener("mouseover", function (ev) {
      var i = dotIndex(ev.target);
      if (i >= 0) showTip(i, ev);
    });
    svg.addEventListener("mouseout", function (ev) {
      if (dotIndex(ev.target) >= 0) tip.hidden = true;
    });
    svg.addEventListener("click", function (ev) {
      var i = dotIndex(ev.target);
      if (i >= 0) { pinDot(i); tip.hidden = true; }
    });
    document.addEventListener("keydown", function (ev) { if (ev.key === "Escape") { pinDot(-1); tip.hidden = true; } });
    // Keyboard: the chart is one Tab stop; focus goes on to a dot (the largest, or the one
    // last visited), arrow keys move between dots (left/right in AI order, up/down to the
    // nearest dot above or below), Enter or Space pins, Escape unpins. The focused dot
    // carries the Tab stop while it has it, so Shift+Tab leaves the chart.
    var current = null;
    function visibleDots() { return all(".dots circle", frameOf(svg)); }
    function centre(c) { var r = c.getBoundingClientRect(); return { clientX: r.left + r.width / 2, clientY: r.top + r.height / 2 }; }
    // The roving Tab stop: the dot `c` holds it, with its role and label.
    function prepare(c) {
      if (current && current !== c) current.removeAttribute("tabindex");
      current = c;
      var d = data[dotIndex(c)];
      c.setAttribute("tabindex", "0");
      c.setAttribute("role", "button");
      c.setAttribute("aria-label", d.n + ": " + d.tip.map(function (kv) { return kv[0] + " " + kv[1]; }).join(", ") + ". Enter pins its panel.");
      svg.setAttribute("tabindex", "-1");
    }
    function focusDot(c) { prepare(c); c.focus(); }
    function releaseFocus() {
      if (current) current.removeAttribute("tabindex");
      current = null;
      svg.setAttribute("tabindex", "0");
    }
    svg.addEventListener("focusin", function (ev) {
      if (ev.target === svg) {
        var dots = visibleDots();
        if (dots.length) focusDot(current && dots.indexOf(current) >= 0 ? current : dots[0]);
        return;
      }
      var i = dotIndex(ev.target);
      if (i >= 0) { prepare(ev.target); showTip(i, centre(ev.target)); }
    });
    // A pointer press moves no focus into the chart (the keyboard's place stays where it was).
    svg.addEventListener("mousedown", function (ev) { ev.preventDefault(); });
    svg.addEventListener("focusout", function (ev) {
      if (!svg.contains(ev.relatedTarget)) tip.hidden = true;
    });
    function step(c, key) {
      var dots = visibleDots(), p = c.getBoundingClientRect();
      var at = function (e) { var r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
      var me = [p.left + p.width / 2, p.top + p.height / 2];
      if (key === "ArrowLeft" || key === "ArrowRight" || key === "Home" || key === "End") {
        var order = dots.map(function (e) { return [at(e), e]; }).sort(function (a, b) { return a[0][0] - b[0][0] || a[0][1] - b[0][1]; });
        var k = order.map(function (o) { return o[1]; }).indexOf(c);
        if (key === "Home") return order[0][1];
        if (key === "End") return order[order.length - 1][1];
        k += key === "ArrowRight" ? 1 : -1;
        return k >= 0 && k < order.length ? order[k][1] : c;
      }
      var sign = key === "ArrowUp" ? -1 : 1, best = c, cost = Infinity;
      dots.forEach(function (e) {
        var q = at(e), dy = (q[1] - me[1]) * sign, dx = Math.abs(q[0] - me[0]);
        if (e !== c && dy > 0.5 && dy + 3 * dx < cost) { cost = dy + 3 * dx; best = e; }
      });
      return best;
    }
    svg.addEventListener("keydown", function (ev) {
      var i = dotIndex(ev.target);
      if (i < 0) return;
      if (ev.key === "Enter" || ev.key === " ") {
        pinDot(i); tip.hidden = true; ev.preventDefault();
      } else if (/^(Arrow(Left|Right|Up|Down)|Home|End)$/.test(ev.key)) {
        focusDot(step(ev.target, ev.key)); ev.preventDefault();
      }
    });
    function setRoof(key, on) {
      all('[data-roof="' + key + '"]', svg).forEach(function (e) { e.style.display = on ? "" : "none"; });
    }
    var boxes = all("input[data-roof]", box);
    boxes.forEach(function (cb) {
      cb.addEventListener("change", function () { setRoof(cb.getAttribute("data-roof"), cb.checked); refine(svg); });
    });
    var every = box.querySelector("input.every");
    if (every) {
      every.addEventListener("change", function () {
        all(".more input[data-roof]", box).forEach(function (cb) {
          cb.checked = every.checked;
          setRoof(cb.getAttribute("data-roof"), cb.checked);
        });
        refine(svg);
      });
    }
    // The full-range frame arrives as text (see chart.rs): built on the first switch, with
    // the legend's roofs and the pinned dot applied to it.
    function frames() {
      var later = document.getElementById(svg.id + "-frames");
      if (later) {
        svg.insertAdjacentHTML("beforeend", later.textContent.replace(/<\\\//g, "</"));
        later.parentNode.removeChild(later);
        boxes.forEach(function (cb) { setRoof(cb.getAttribute("data-roof"), cb.checked); });
        if (pinned >= 0) mark(pinned, true);
      }
      return all("g.frame", svg);
    }
    var zoom = box.querySelector("button.zoom");
    if (zoom) {
      zoom.addEventListener("click", function () {
        var f = frames();
        var full = f[0].style.display !== "none";
        f[0].style.display = full ? "none" : "";
        f[1].style.display = full ? "" : "none";
        zoom.textContent = full ? "Zoom to the dots" : "Full range";
        zoom.setAttribute("aria-pressed", full ? "true" : "false");
        if (current && !frameOf(svg).contains(current)) releaseFocus();
        refine(svg);
      });
    }
    refine(svg);
  }
  // The script follows the charts in the page: they are set up at once, while the folded
  // sections below are still being read.
  all(".chartbox").forEach(setup);

  // A chart drawn on demand (a large job's ranks): its section arrives as text (each `</`
  // written `<\u002f`), is built and set up on the first press, shown or hidden after.
  all("section.later").forEach(function (later) {
    var id = later.getAttribute("data-chart"), button = later.querySelector("button.draw"), box = null, shown = false;
    button.addEventListener("click", function () {
      if (!box) {
        var text = document.getElementById(id + "-markup");
        button.parentNode.insertAdjacentHTML("afterend", text.textContent.replace(/<\\u002f/g, "</"));
        text.parentNode.removeChild(text);
        box = later.querySelector(".chartbox");
        setup(box);
        shown = true;
      } else {
        shown = !shown;
        box.style.display = shown ? "" : "none";
      }
      button.setAttribute("aria-expanded", shown ? "true" : "false");
      button.textContent = button.getAttribute(shown ? "data-hide" : "data-show");
    });
  });

  // The folded sections of many rows are built when first opened, from the page's data.
  // They follow this script in the page: their toggle is caught on the document (it does
  // not bubble; capture sees it).
  function once(sel, build) {
    document.addEventListener("toggle", function (ev) {
      var det = ev.target;
      if (!det.matches || !det.matches(sel) || !det.open || det.hasAttribute("data-built")) return;
      det.setAttribute("data-built", "");
      build(det);
    }, true);
  }
  function value(pairs, key) {
    for (var k = 0; k < pairs.length; k++) if (pairs[k][0] === key) return pairs[k][1];
    return null;
  }
  function card(d) {
    var c = el("div", "card"), h = el("h3", "", d.n);
    if (d.full) h.title = d.full;
    c.appendChild(h);
    var p = el("p");
    p.appendChild(el("span", "bound " + d.bc, d.b));
    var of = d.tip && value(d.tip, "of roof"), roof = d.tip && value(d.tip, "roof");
    if (of) p.appendChild(document.createTextNode(" — " + of + " of its roof" + (roof ? " (" + roof + ")" : "")));
    c.appendChild(p);
    if (d.warn) c.appendChild(el("p", "warn", "Warning: " + d.warn));
    if (d.reg) {
      var g = el("p", "", "GPU regime: ");
      g.appendChild(el("b", "", d.reg[0] + "-bound"));
      g.appendChild(document.createTextNode(" (" + d.reg[1] + ")"));
      c.appendChild(g);
    }
    var ul = el("ul", "adv");
    d.adv.forEach(function (t) { ul.appendChild(el("li", "", t)); });
    c.appendChild(ul);
    if (d.kern) {
      c.appendChild(el("p", "", "Kernels in this region:"));
      var ks = el("ul");
      d.kern.forEach(function (k) { ks.appendChild(el("li", "", k[0] + " — " + k[1] + " launch(es), " + k[2] + "% of the region's GPU time")); });
      c.appendChild(ks);
    }
    return c;
  }
  once("details.cards", function (det) {
    var frag = document.createDocumentFragment();
    chartIds().forEach(function (id) { docOf(id).dots.forEach(function (d) { frag.appendChild(card(d)); }); });
    JSON.parse(document.getElementById("cards-data").textContent).forEach(function (d) { frag.appendChild(card(d)); });
    det.querySelector(".grid").appendChild(frag);
  });
  once("details.points", function (det) {
    var doc = JSON.parse(document.getElementById("points-data").textContent);
    var t = el("table"), tr = el("tr"), b = doc.h.indexOf("bound");
    doc.h.forEach(function (h) { tr.appendChild(el("th", "", h)); });
    t.appendChild(tr);
    doc.r.forEach(function (r) {
      var row = el("tr");
      for (var k = 0; k < r.length - 1; k++) {
        var v = typeof r[k] === "number" ? doc.pv[r[k]] : r[k];
        row.appendChild(el("td", k === b ? "bound " + r[r.length - 1] : "", v));
      }
      t.appendChild(row);
    });
    det.querySelector(".scroll").appendChild(t);
  });
})();
