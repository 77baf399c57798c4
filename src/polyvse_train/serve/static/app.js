// polyvse search page: text query (with language picker), photo upload (drag and drop or file input),
// similar photos on click. Everything from the server is inserted as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { model: null, captions: false };

function setStatus(text, isError = false) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", isError);
}

async function api(url, options = {}) {
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
    fig.addEventListener("click", () => similar(hit.id, hit.name));
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

async function searchText(event) {
  event.preventDefault();
  const query = $("query").value;
  const lang = $("lang").value;
  const k = Number($("k").value);
  busy(true);
  setStatus("searching…");
  try {
    const body = await api("/api/search/text", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ query, lang, k }),
    });
    showCaptions([]);
    showResults(body.results);
    let how = body.lang;
    if (body.detected) how = "detected " + body.lang + " (" + Math.round(body.detected.confidence * 100) + "%)";
    let text = body.results.length + " photos for “" + body.query + "” · " + how + " · " + body.took_ms + " ms";
    if (body.unknown_words.length) text += " · unknown words: " + body.unknown_words.join(", ");
    setStatus(text);
  } catch (err) {
    setStatus(err.message, true);
  } finally {
    busy(false);
  }
}

async function uploadPhoto(file) {
  if (!file) return;
  const preview = $("upload-preview");
  if (preview.src) URL.revokeObjectURL(preview.src);
  preview.src = URL.createObjectURL(file);
  preview.hidden = false;
  const k = $("k").value;
  busy(true);
  setStatus("searching by photo " + file.name + "…");
  try {
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("k", k);
    const body = await api("/api/search/image", { method: "POST", body: form });
    showResults(body.results);
    setStatus(body.results.length + " photos like " + body.image.name + " · " + body.took_ms + " ms");
    if (state.captions) {
      const capForm = new FormData();
      capForm.append("file", file, file.name);
      capForm.append("k", "5");
      const caps = await api("/api/captions/image", { method: "POST", body: capForm });
      showCaptions(caps.results);
    } else {
      showCaptions([]);
    }
  } catch (err) {
    showCaptions([]);
    setStatus(err.message, true);
  } finally {
    busy(false);
  }
}

async function similar(id, name) {
  busy(true);
  setStatus("photos like " + name + "…");
  try {
    const k = $("k").value;
    const body = await api("/api/photos/" + encodeURIComponent(id) + "/similar?k=" + encodeURIComponent(k));
    showResults(body.results);
    setStatus(body.results.length + " photos like " + name + " · " + body.took_ms + " ms");
    if (state.captions) {
      const caps = await api("/api/photos/" + encodeURIComponent(id) + "/captions?k=5");
      showCaptions(caps.results);
    }
  } catch (err) {
    setStatus(err.message, true);
  } finally {
    busy(false);
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
  $("search-form").addEventListener("submit", searchText);
  setUpDropZone();
  try {
    const model = await api("/api/model");
    state.model = model;
    state.captions = Boolean(model.captions && model.captions.count);
    const select = $("lang");
    for (const code of model.languages) {
      const opt = document.createElement("option");
      opt.value = code;
      opt.textContent = (model.language_names[code] || code) + " (" + code + ")";
      select.append(opt);
    }
    $("model-info").textContent = model.index.photos + " photos · languages " + model.languages.join(", ") +
      " · " + model.similarity + " similarity · " + model.index.kind + " search";
    document.body.dataset.ready = "1";
  } catch (err) {
    $("model-info").textContent = "";
    setStatus("cannot load the model description: " + err.message, true);
  }
}

init();
