// Run inside a rendered report.html (tests/reports/report_browser_test.cpp inserts it after the report's own
// script): checks what the reader sees at the window's width and writes {failures, facts} as JSON into
// a <pre> of id twin-check, which the test reads from Chromium's --dump-dom.
'use strict';
(function () {
  const failures = [], facts = {};
  const fail = text => { if (failures.length < 40) failures.push(text); };
  const kSlackPx = 0.5;
  const describe = el => `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''} "${(el.textContent || '').trim().slice(0, 60)}"`;

  // No text of any chart reaches past its SVG's box, and no chart is wider than its container.
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    for (const text of svg.querySelectorAll('text')) {
      const r = text.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < box.left - kSlackPx || r.right > box.right + kSlackPx || r.top < box.top - kSlackPx ||
          r.bottom > box.bottom + kSlackPx)
        fail(`label outside its chart (${svg.getAttribute('aria-label')}): ${describe(text)}`);
    }
    const chart = svg.closest('.chart');
    if (chart && chart.scrollWidth > chart.clientWidth + 1)
      fail(`chart wider than its container: ${svg.getAttribute('aria-label')}`);
  }
  // Text blocks hold their content (a long plan key wraps rather than overflowing).
  for (const el of document.querySelectorAll('h1, h2, h3, p, dd, dt, .card, .legend span, td.key, th')) {
    if (el.closest('.table-scroll')) continue;  // wide tables scroll inside their own box
    if (el.scrollWidth > el.clientWidth + 1) fail(`text overflows its box: ${describe(el)}`);
  }
  const page = document.scrollingElement;
  if (page.scrollWidth > window.innerWidth) fail(`the page scrolls sideways: ${page.scrollWidth} > ${window.innerWidth}`);
  facts.window_width = window.innerWidth;

  // The trade-off view: the chart, its points named by the script, and the front listed.
  const points = document.querySelectorAll('#tradeoffs svg [data-row]');
  facts.tradeoff_points = points.length;
  facts.named_points = [...points].filter(p => p.querySelector('title')).length;
  facts.front_rows = document.querySelectorAll('#tradeoffs table.front tr').length - 1;

  // The ranking: drawn from the data, sortable by a heading, filterable.
  const data = JSON.parse(document.getElementById('ranking-data').textContent);
  const table = document.getElementById('ranking');
  const rows = () => [...table.tBodies[0].rows];
  facts.data_rows = data.rows.length;
  facts.table_rows = rows().length;
  const headings = [...table.tHead.rows[0].cells];
  const column = label => headings.findIndex(th => th.querySelector('button').textContent === label);
  const cells = at => rows().map(tr => tr.cells[at].textContent);
  const numbers = at => cells(at).filter(Boolean).map(t => parseFloat(t.replace(/[,%+]/g, '')));
  const sorted = (values, descending) => values.every((v, i) => i === 0 || (descending ? values[i - 1] >= v : values[i - 1] <= v));

  const memory = column('peak memory (GiB)');
  headings[memory].querySelector('button').click();
  facts.sorted_ascending = sorted(numbers(memory), false) && headings[memory].getAttribute('aria-sort') === 'ascending';
  headings[memory].querySelector('button').click();
  facts.sorted_descending = sorted(numbers(memory), true) && headings[memory].getAttribute('aria-sort') === 'descending';
  const strategy = column('strategy');
  headings[strategy].querySelector('button').click();
  const keys = cells(strategy).map(k => k.toLowerCase());
  facts.sorted_text = sorted(keys, false);

  const filter = document.getElementById('ranking-filter');
  filter.value = 'tp=2';
  filter.dispatchEvent(new Event('input'));
  const tp = column('TP');
  facts.filtered_rows = rows().length;
  facts.filter_holds = cells(tp).every(t => t === '2');
  filter.value = 'memory<60 1f1b';
  filter.dispatchEvent(new Event('input'));
  facts.compared_rows = rows().length;
  facts.compare_holds = cells(memory).every(t => t !== '' && parseFloat(t) < 60) &&
    rows().every(tr => tr.textContent.includes('1f1b'));
  filter.value = '';
  filter.dispatchEvent(new Event('input'));
  facts.unfiltered_rows = rows().length;
  facts.moe_all_to_all = /dispatch and combine all-to-all/.test((document.getElementById('compare') || {}).textContent || '');

  const out = document.createElement('pre');
  out.id = 'twin-check';
  out.textContent = JSON.stringify({failures, facts});
  document.body.appendChild(out);
}());
