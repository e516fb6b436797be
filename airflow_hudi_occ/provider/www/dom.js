// What the timeline page's scripts share: element builders that only ever set text through
// textContent and attributes through setAttribute (never innerHTML: every value comes from a
// table someone else wrote), and one JSON fetch that turns the API's structured errors
// ({detail: {message, remedy}}) into a message that says what to do. Loaded first.
var HudiDom = (function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  function build(e, attrs, text) {
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  return {
    $: function (id) { return document.getElementById(id); },
    el: function (tag, attrs, text) { return build(document.createElement(tag), attrs, text); },
    sv: function (tag, attrs, text) { return build(document.createElementNS(SVG, tag), attrs, text); },
    api: function (path) {
      return fetch(path, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) {
          return r.json().catch(function () { return {}; }).then(function (body) {
            if (!r.ok) {
              var d = body && body.detail;
              var msg = typeof d === "string" ? d : (d && (d.message + (d.remedy ? " (what to do: " + d.remedy + ")" : "")));
              throw new Error("HTTP " + r.status + ": " + (msg || r.statusText));
            }
            return body;
          });
        });
    }
  };
})();
