// report.html's one script, inlined by the build (reports/embed_script.cmake): it measures every chart's text
// and fits the chart around it, builds the ranking table from the data embedded once in the page (the JSON of the
// element whose id is ranking-data), lets the reader sort and filter it, and names the points of the trade-off
// chart. Nothing here reaches outside the page.
'use strict';
(function () {
  const kMarginPx = 4;        // around a chart's measured content
  const kRowsShown = 1000;    // rows drawn at once; "show all" draws the rest

  // A chart's viewBox becomes the measured box of what it draws, so that labels of any length are neither
  // clipped nor given room they do not use. The SVG keeps its aspect and shrinks to its container (CSS).
  function fitCharts() {
    for (const svg of document.querySelectorAll('svg[data-fit]')) {
      const box = svg.getBBox();
      const x = Math.floor(box.x) - kMarginPx, y = Math.floor(box.y) - kMarginPx;
      const width = Math.ceil(box.x + box.width) + kMarginPx - x;
      const height = Math.ceil(box.y + box.height) + kMarginPx - y;
      svg.setAttribute('viewBox', `${x} ${y} ${width} ${height}`);
      svg.setAttribute('width', width);
      svg.setAttribute('height', height);
    }
  }

  // Display of one cell by its column's format (ranking_table.cpp names them); sorting and filters compare what is
  // displayed. A format not named here shows the field as it is.
  const kFormats = {
    ms: value => (value * 1000).toFixed(3),
    percent: value => (value * 100).toFixed(1) + '%',
    grouped: value => Math.round(value).toLocaleString('en-US'),
    versus: value => value === 0 ? 'best' : '+' + (value * 100).toFixed(1) + '%',
  };
  function display(format, raw) {
    if (raw === '') return '';
    if (format === 'flag') return raw === 'true' ? 'yes' : raw === 'false' ? 'no' : raw;
    return kFormats[format] ? kFormats[format](Number(raw)) : raw;
  }
  function sortValue(column, raw) {
    if (raw === '') return null;
    return column.numeric ? Number(raw) : raw.toLowerCase();
  }

  // "tp=2 mfu>40 1f1b": each term must hold; "name<op>value" compares a column (its name or heading, else the
  // first whose name or heading holds it: "memory") by the number or text it shows; a bare term looks for the
  // text in any cell.
  function parseFilter(text, columns) {
    const terms = [];
    for (const word of text.trim().split(/\s+/).filter(Boolean)) {
      const match = /^([A-Za-z_][\w ]*?)(<=|>=|!=|=|<|>)(.+)$/.exec(word);
      const wanted = match && match[1].toLowerCase();
      const named = (c, same) => same(c.name.toLowerCase()) || same(c.label.toLowerCase());
      const column = wanted && (columns.find(c => named(c, n => n === wanted)) ||
                                columns.find(c => named(c, n => n.includes(wanted))));
      terms.push(column ? {column, op: match[2], value: match[3].toLowerCase()} : {text: word.toLowerCase()});
    }
    return terms;
  }
  function compare(shown, op, wanted) {
    if (shown === '') return op === '!=';  // an empty field (not simulated) holds no value to compare
    const a = parseFloat(shown.replace(/[,%+]/g, '')), b = parseFloat(wanted);
    const numeric = !Number.isNaN(a) && !Number.isNaN(b) && /^[-+\d.,%]+$/.test(wanted);
    const x = numeric ? a : shown.toLowerCase(), y = numeric ? b : wanted;
    switch (op) {
      case '=': return x === y;
      case '!=': return x !== y;
      case '<': return x < y;
      case '>': return x > y;
      case '<=': return x <= y;
      case '>=': return x >= y;
    }
    return false;
  }

  function buildTable(data) {
    const table = document.getElementById('ranking');
    const filter = document.getElementById('ranking-filter');
    const simulatedOnly = document.getElementById('ranking-simulated');
    const count = document.getElementById('ranking-count');
    const more = document.getElementById('ranking-more');
    const columns = data.columns;
    const rows = data.rows.map((cells, index) => ({cells, index,
      shown: columns.map(c => display(c.format, cells[c.index]))}));
    const feasibleColumn = columns.find(c => c.name === 'feasible');
    const versusColumn = columns.find(c => c.format === 'versus');
    let sortBy = null, descending = false, showAll = false;

    const head = table.createTHead().insertRow();
    for (const column of columns) {
      const th = document.createElement('th');
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = column.label;
      if (column.title) th.title = column.title;
      button.addEventListener('click', () => {
        descending = sortBy === column ? !descending : false;
        sortBy = column;
        render();
      });
      th.dataset.column = column.name;
      th.appendChild(button);
      head.appendChild(th);
    }
    const body = table.createTBody();

    function render() {
      const terms = parseFilter(filter.value, columns);
      let kept = rows.filter(row => {
        if (simulatedOnly.checked && feasibleColumn && row.cells[feasibleColumn.index] !== 'true') return false;
        return terms.every(term => term.column
          ? compare(row.shown[columns.indexOf(term.column)], term.op, term.value)
          : row.shown.some(s => s.toLowerCase().includes(term.text)) ||
            row.cells.some(s => s.toLowerCase().includes(term.text)));
      });
      if (sortBy) {
        const at = columns.indexOf(sortBy);
        kept = kept.map(row => ({row, key: sortValue(sortBy, row.cells[sortBy.index])}));
        kept.sort((a, b) => {  // empty cells last either way; equal ones keep the ranking's order
          if (a.key === null || b.key === null) return (a.key === null) - (b.key === null) || a.row.index - b.row.index;
          const order = a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
          return (descending ? -order : order) || a.row.index - b.row.index;
        }).forEach((entry, i) => { kept[i] = entry.row; });
        for (const th of head.cells)
          th.setAttribute('aria-sort', th.cellIndex === at ? (descending ? 'descending' : 'ascending') : 'none');
      }
      const drawn = showAll ? kept : kept.slice(0, kRowsShown);
      const fragment = document.createDocumentFragment();
      for (const row of drawn) {
        const tr = document.createElement('tr');
        const feasible = !feasibleColumn || row.cells[feasibleColumn.index] === 'true';
        tr.className = feasible ? 'feasible' : 'infeasible';
        if (row.index === 0 && feasible) tr.classList.add('best');
        if (feasible && versusColumn && row.index > 0 && Number(row.cells[versusColumn.index]) <= data.tie_fraction)
          tr.classList.add('tie');
        columns.forEach((column, c) => {
          const td = tr.insertCell();
          td.textContent = row.shown[c] + (column === versusColumn && tr.classList.contains('tie') ? ' (tie)' : '');
          if (column.css) td.className = column.css;
        });
        fragment.appendChild(tr);
      }
      body.replaceChildren(fragment);
      count.textContent = `${kept.length} of ${rows.length} candidates match` +
        (drawn.length < kept.length ? `; the first ${drawn.length} are shown` : '');
      more.hidden = drawn.length >= kept.length;
    }
    filter.addEventListener('input', render);
    simulatedOnly.addEventListener('change', render);
    more.addEventListener('click', () => { showAll = true; render(); });
    render();
    return {rows, columns, filter, render};
  }

  // Points of the trade-off chart carry their row's index: their tooltips come from the data, and a click
  // shows the row in the table.
  function namePoints(table) {
    const key = table.columns.find(c => c.name === 'strategy');
    const described = table.columns.filter(c => c.tooltip);
    for (const point of document.querySelectorAll('#tradeoffs [data-row]')) {
      const row = table.rows[Number(point.dataset.row)];
      const title = document.createElementNS(point.namespaceURI, 'title');
      const lines = [row.cells[key.index]];
      for (const c of described) {
        const shown = row.shown[table.columns.indexOf(c)];
        if (shown) lines.push(`${c.label}: ${shown}`);
      }
      title.textContent = lines.join('\n');
      point.appendChild(title);
      point.addEventListener('click', () => {
        table.filter.value = row.cells[key.index];
        table.render();
        document.getElementById('candidates').scrollIntoView();
      });
    }
  }

  fitCharts();
  const source = document.getElementById('ranking-data');
  if (source) {
    const data = JSON.parse(source.textContent);
    namePoints(buildTable(data));
  }
}());
