// The look shared by twin's HTML pages (report.html, execution_report.html): type, headings, fact lists,
// cards, charts and legends. Each page adds the rules of its own tables and pictures.
#pragma once

namespace twin {

inline constexpr const char* kPageStyle = R"(:root { color-scheme: light; }
body { font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans",
       sans-serif; font-size: 15px; line-height: 1.45; color: #1f2328; background: #fff; margin: 0; }
main { max-width: 1480px; margin: 0 auto; padding: 24px 32px 48px; }
h1 { font-size: 26px; margin: 0 0 6px; }
h2 { font-size: 19px; margin: 32px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #e3e6eb; }
code, .key { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: 13px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 12px 0; }
dl.facts dt { color: #59636e; } dl.facts dd { margin: 0; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid #e3e6eb; border-radius: 8px; padding: 10px 14px; min-width: 130px; }
.card b { display: block; font-size: 20px; } .card span { color: #59636e; font-size: 13px; }
.chart { overflow-x: auto; margin: 8px 0; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; font-size: 13px; margin: 6px 0; }
.legend i { display: inline-block; width: 12px; height: 12px; border-radius: 2px; margin-right: 5px;
            vertical-align: -1px; }
)";

}  // namespace twin
