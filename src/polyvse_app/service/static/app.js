// polyvse search page: text query (with language picker), photo upload (drag and drop or file input),
// similar photos on click. Everything from the server is inserted as text, never as HTML.
// The address holds the search (?q=&lang=&k=, or ?similar=ID&k=), so a result page can be shared, reloaded
// and reached again with Back; an uploaded photo cannot be put in an address, so an upload leaves the bare page.
"use strict";

const $ = (id) => document.getElementById(id);
// seq: number of the latest search; answers to older ones (a quick Back, Back) are dropped
const state = { model: null, captions: false, seq: 0 };

function setStatus(text, isError = false) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", isError);
}

// A server started with --token wants it on /api: the page asks for it once and keeps it in a cookie for this
// site, which fetch() and every <img> send. A link may carry it as #token=... (a fragment never reaches a server).
function rememberToken(token) {
  const secure = location.protocol === "https:" ? "; Secure" : "";
  document.cookie = "polyvse_token=" + token + "; path=/; SameSite=Strict" + secure;
}

function tokenFromAddress() {
  const match = /^#token=([^&]+)/.exec(location.hash);
  if (!match) return;
  rememberToken(decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

async function api(url, options = {}, askedForToken = false) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (err) {
    throw new Error("the server cannot be reached (" + err.message + ")");
  }
  let body = null;
  try {
    body = await response.json();
  } catch (err) {
    body = null;
  }
  if (response.status === 401 && !askedForToken) {
    const token = window.prompt("This server wants its token (the one polyvse serve was started with):");
    if (token) {
      rememberToken(token.trim());
      return api(url, options, true);
    }
  }
  if (!response.ok) {
    const detail = body && body.detail ? body.detail : response.status + " " + response.statusText;
    throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return body;
}

function showResults(results) {
  const grid = $("results");
  grid.replaceChildren();
  for (const hit of results) {
    const fig = document.createElement("figure");
    fig.className = "result";
    fig.dataset.id = String(hit.id);
    fig.title = hit.name;
    const img = document.createElement("img");
    img.src = hit.thumbnail;
    img.alt = hit.name;
    img.loading = "lazy";
    const cap = document.createElement("figcaption");
    const rank = document.createElement("span");
    rank.className = "rank";
    rank.textContent = "#" + hit.rank;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = hit.score.toFixed(3);
    cap.append(rank, score);
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = hit.name;
    fig.append(img, cap, name);
    fig.addEventListener("click", () => similar(hit.id, hit.name, $("k").value, true));
    grid.append(fig);
  }
}

function showCaptions(results) {
  const section = $("captions");
  const list = $("caption-list");
  list.replaceChildren();
  for (const c of results || []) {
    const li = document.createElement("li");
    const lang = document.createElement("span");
    lang.className = "lang";
    lang.textContent = c.lang;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = " " + c.score.toFixed(3) + " ";
    const text = document.createElement("span");
    text.className = "caption";
    text.textContent = c.caption;
    li.append(lang, score, text);
    list.append(li);
  }
  section.hidden = !(results && results.length);
}

function busy(on) {
  $("search-button").disabled = on;
}

// A new history entry for a search unless the address already shows it (the same search again, or Back).
function remember(params) {
  const search = params ? new URLSearchParams(params).toString() : "";
  if (search !== new URLSearchParams(location.search).toString()) {
    history.pushState(null, "", location.pathname + (search ? "?" + search : ""));
  }
}

function showK(k) {
  const select = $("k");
  // a shared address may carry a k the menu lacks (the server accepts 1..max_k)
  if (/^[1-9][0-9]*$/.test(k) && ![...select.options].some((o) => o.value === k)) select.append(new Option(k, k));
  select.value = k;
}

function searchText(event) {
  event.preventDefault();
  textSearch({ q: $("query").value, lang: $("lang").value, k: $("k").value }, true);
}

async function textSearch({ q, lang, k }, push) {
  if (push) remember({ q, lang, k });
  const seq = ++state.seq;
  busy(true);
  setStatus("searching…");
  try {
    const body = await api("/api/search/text", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query: q, lang, k: Number(k) }),
    });
    if (seq !== state.seq) return;
    showCaptions([]);
    showResults(body.results);
    let how = body.lang;
    if (body.detected) how = "detected " + body.lang + " (" + Math.round(body.detected.confidence * 100) + "%)";
    let text = body.results.length + " photos for “" + body.query + "” · " + how + " · " + body.took_ms + " ms";
    if (body.unknown_words.length) text += " · unknown words: " + body.unknown_words.join(", ");
    setStatus(text);
  } catch (err) {
    if (seq === state.seq) setStatus(err.message, true);
  } finally {
    if (seq === state.seq) busy(false);
  }
}

async function uploadPhoto(file) {
  if (!file) return;
  const preview = $("upload-preview");
  if (preview.src) URL.revokeObjectURL(preview.src);
  preview.src = URL.createObjectURL(file);
  preview.hidden = false;
  const k = $("k").value;
  remember(null);
  const seq = ++state.seq;
  busy(true);
  setStatus("searching by photo " + file.name + "…");
  try {
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("k", k);
    const body = await api("/api/search/image", { method: "POST", body: form });
    if (seq !== state.seq) return;
    showResults(body.results);
    setStatus(body.results.length + " photos like " + body.image.name + " · " + body.took_ms + " ms");
    if (state.captions) {
      const capForm = new FormData();
      capForm.append("file", file, file.name);
      capForm.append("k", "5");
      const caps = await api("/api/captions/image", { method: "POST", body: capForm });
      if (seq === state.seq) showCaptions(caps.results);
    } else {
      showCaptions([]);
    }
  } catch (err) {
    if (seq !== state.seq) return;
    showCaptions([]);
    setStatus(err.message, true);
  } finally {
    if (seq === state.seq) busy(false);
  }
}

// photos like indexed photo `id`; `name` is known after a click, and comes with the answer after a reload
async function similar(id, name, k, push) {
  if (push) remember({ similar: id, k });
  const seq = ++state.seq;
  busy(true);
  setStatus("photos like " + (name || "photo " + id) + "…");
  try {
    const body = await api("/api/photos/" + encodeURIComponent(id) + "/similar?k=" + encodeURIComponent(k));
    if (seq !== state.seq) return;
    showResults(body.results);
    setStatus(body.results.length + " photos like " + body.image.name + " · " + body.took_ms + " ms");
    if (state.captions) {
      const caps = await api("/api/photos/" + encodeURIComponent(id) + "/captions?k=5");
      if (seq === state.seq) showCaptions(caps.results);
    }
  } catch (err) {
    if (seq === state.seq) setStatus(err.message, true);
  } finally {
    if (seq === state.seq) busy(false);
  }
}

// The search the address names (on load, and on Back/Forward), without a new history entry.
function restore() {
  const params = new URLSearchParams(location.search);
  const k = params.get("k") || String(state.model.limits.default_k);
  if (params.has("q")) {
    const search = { q: params.get("q"), lang: params.get("lang") || "auto", k };
    $("query").value = search.q;
    // an unknown code stays out of the menu; the server's answer names the languages it knows
    if ([...$("lang").options].some((o) => o.value === search.lang)) $("lang").value = search.lang;
    showK(k);
    textSearch(search, false);
  } else if (params.has("similar")) {
    showK(k);
    similar(params.get("similar"), null, k, false);
  } else {  // the bare page: nothing searched yet, or an upload (which cannot be replayed)
    state.seq++;
    busy(false);
    $("query").value = "";
    $("upload-preview").hidden = true;
    showResults([]);
    showCaptions([]);
    setStatus("");
  }
}

function setUpDropZone() {
  const zone = $("drop-zone");
  for (const type of ["dragenter", "dragover"]) {
    zone.addEventListener(type, (e) => {
      e.preventDefault();
      zone.classList.add("dragover");
    });
  }
  for (const type of ["dragleave", "dragend"]) {
    zone.addEventListener(type, () => zone.classList.remove("dragover"));
  }
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("dragover");
    const files = e.dataTransfer && e.dataTransfer.files;
    if (!files || !files.length) {
      setStatus("drop a photo file (JPEG, PNG, …)", true);
      return;
    }
    uploadPhoto(files[0]);
  });
  // a photo dropped next to the zone should not make the browser navigate away to it
  window.addEventListener("dragover", (e) => e.preventDefault());
  window.addEventListener("drop", (e) => e.preventDefault());
  $("file-input").addEventListener("change", (e) => uploadPhoto(e.target.files[0]));
}

async function init() {
  tokenFromAddress();
  $("search-form").addEventListener("submit", searchText);
  setUpDropZone();
  try {
    const model = await api("/api/model");
    state.model = model;
    state.captions = Boolean(model.captions && model.captions.count);
    // every language the model serves, in groups: trained, adapted (polyvse adapt), read zero-shot by its towers
    const select = $("lang");
    const groups = { trained: "trained on", adapted: "taught with polyvse adapt", "zero-shot": "read zero-shot" };
    const served = model.served_languages || model.languages.map((code) => ({ code, status: "trained" }));
    for (const [status, label] of Object.entries(groups)) {
      const members = served.filter((l) => l.status === status);
      if (!members.length) continue;
      const group = document.createElement("optgroup");
      group.label = label;
      for (const lang of members) {
        const opt = document.createElement("option");
        opt.value = lang.code;
        opt.textContent = (lang.name || model.language_names[lang.code] || lang.code) + " (" + lang.code + ")";
        group.append(opt);
      }
      select.append(group);
    }
    const others = served.length - model.languages.length;
    $("model-info").textContent = model.index.photos + " photos · languages " + model.languages.join(", ") +
      (others > 0 ? " (+" + others + " more)" : "") +
      " · " + model.similarity + " similarity · " + model.index.kind + " search";
    document.body.dataset.ready = "1";
  } catch (err) {
    $("model-info").textContent = "";
    setStatus("cannot load the model description: " + err.message, true);
    return;
  }
  window.addEventListener("popstate", restore);
  restore();
}

init();
