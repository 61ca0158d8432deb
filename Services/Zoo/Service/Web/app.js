// The visitor's page: search with filters, an animal's detail, the footpaths as SVG and a walk drawn on them.
// It speaks the zoo service's Connect protocol (unary JSON over HTTP/1.1) with fetch(); nothing else is loaded,
// so it works from the service itself with no build step, no CDN and no tile server.
'use strict';

(() => {
  const SERVICE_PATH = '/menagerie.zoo.v1.Zoo/';
  const PAGE_SIZE = 20;

  // ---- the service ---------------------------------------------------------------------------------

  /// Where the Connect calls go: the page's own origin, or `?api=http://host:port` while developing the page
  /// against a zoo on another port (the service answers CORS preflights for any origin).
  function apiBase() {
    const override = new URLSearchParams(location.search).get('api');
    if (!override) return '';
    let url;
    try { url = new URL(override); } catch { throw new Error(`?api= is not a URL: ${override}`); }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`?api= must be an http(s) URL: ${override}`);
    return url.origin;
  }

  class ServiceError extends Error {
    constructor(code, message) { super(message); this.code = code; }
  }

  /// One unary call. Reads that are the same for every visitor (filters, the map) go as Connect GETs so the
  /// browser can revalidate them with their ETag; the rest are POSTs with the JSON message as body.
  async function call(method, message, { get = false } = {}) {
    const url = apiBase() + SERVICE_PATH + method;
    let response;
    try {
      response = get
        ? await fetch(`${url}?connect=v1&encoding=json&message=${encodeURIComponent(JSON.stringify(message))}`)
        : await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(message) });
    } catch (error) {
      throw new ServiceError('unavailable', `The zoo service cannot be reached (${error.message}).`);
    }
    const body = await response.json().catch(() => null);
    if (!response.ok) {
      throw new ServiceError(body?.code ?? 'unknown', body?.message ?? `The zoo service answered ${response.status}.`);
    }
    return body ?? {};
  }

  // ---- small helpers ---------------------------------------------------------------------------------

  const $ = (id) => document.getElementById(id);
  const SVG_NS = 'http://www.w3.org/2000/svg';

  function element(tag, attributes = {}, ...children) {
    const node = tag.startsWith('svg:') ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (value !== undefined && value !== null) node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child !== undefined && child !== null) node.append(child);
    }
    return node;
  }

  function formatLength(metres) {
    return metres < 1000 ? `${Math.round(metres)} m` : `${(metres / 1000).toFixed(1)} km`;
  }

  function formatWalk(seconds) {
    return `${Math.max(1, Math.round(seconds / 60))} min walk`;
  }

  function formatPoint(point) {
    return `${point.lat.toFixed(5)}, ${point.lon.toFixed(5)}`;
  }

  const PLACE_KINDS = {
    PLACE_KIND_PEN: 'its own enclosure',
    PLACE_KIND_HOUSE: 'its house',
    PLACE_KIND_ZOO_PART: 'its part of the zoo',
    PLACE_KIND_POINT: 'a point',
  };

  // ---- state -----------------------------------------------------------------------------------------

  const state = {
    projection: null,   // set once the map is loaded
    start: null,        // {lat, lon} the visitor set
    cursor: null,       // keyboard cursor in map units {x, y}
    animal: null,       // the animal shown in the detail
    target: null,       // what the last walk went to: {animalId} or {zooHouse}
    searchSerial: 0,
    offset: 0,
  };

  // ---- search ----------------------------------------------------------------------------------------

  // Each filter is a group of checkboxes: the service matches any ticked value of a group (OR) and every group
  // with one ticked (AND), as SearchAnimalsRequest's repeated fields say, so "mammals of the seas or fresh
  // waters" is one search.
  const filterGroups = () => Array.from(document.querySelectorAll('#filters fieldset.choices'));
  const ticked = (group) => Array.from(group.querySelectorAll('input:checked'), (box) => box.value);

  /// Fills the groups from ListFilterValues; values still offered stay ticked, the rest are dropped (the
  /// service refuses a value it does not know).
  async function loadFilters() {
    const values = await call('ListFilterValues', { includeUnavailable: $('include-unavailable').checked }, { get: true });
    for (const group of filterGroups()) {
      const chosen = new Set(ticked(group));
      const boxes = (values[group.dataset.kind] ?? []).map(({ value, count = 0 }) => {
        const box = element('input', { type: 'checkbox', name: group.dataset.field, value });
        box.checked = chosen.has(value);
        return element('label', { class: 'check' }, box, ` ${value} `, element('span', { class: 'count' }, `(${count})`));
      });
      group.replaceChildren(group.querySelector('legend'), ...boxes);
    }
    document.body.dataset.filters = 'ready';
  }

  /// The collapsed filters still say how many are chosen, so a narrowed search is never a surprise.
  function showFilterCount() {
    const chosen = filterGroups().reduce((sum, group) => sum + ticked(group).length, 0) + ($('include-unavailable').checked ? 1 : 0);
    $('filter-count').textContent = chosen ? `(${chosen} chosen)` : '';
  }

  function searchRequest(offset) {
    const request = { text: $('search-text').value.trim(), offset, pageSize: PAGE_SIZE };
    for (const group of filterGroups()) {
      const values = ticked(group);
      if (values.length) request[group.dataset.field] = values;
    }
    if ($('include-unavailable').checked) request.includeUnavailable = true;
    return request;
  }

  /// Runs the search; `more` appends the next page. An answer overtaken by a newer search is dropped.
  async function search({ more = false } = {}) {
    const serial = ++state.searchSerial;
    showFilterCount();
    const offset = more ? state.offset : 0;
    const status = $('search-status');
    document.body.dataset.search = 'loading';
    status.textContent = 'Searching…';
    try {
      const response = await call('SearchAnimals', searchRequest(offset));
      if (serial !== state.searchSerial) return;
      const animals = response.animals ?? [];
      const total = response.total ?? 0;
      const list = $('results');
      if (!more) list.replaceChildren();
      for (const animal of animals) list.append(resultItem(animal));
      state.offset = offset + animals.length;
      $('more-button').hidden = state.offset >= total;
      status.textContent = total === 0 ? 'No animal matches.' : `${total} ${total === 1 ? 'animal' : 'animals'} found.`;
    } catch (error) {
      if (serial !== state.searchSerial) return;
      status.textContent = error.message;
    }
    document.body.dataset.search = 'done';
  }

  function resultItem(animal) {
    const about = [animal.latinName, animal.className, animal.location].filter(Boolean).join(' · ');
    const button = element('button', { type: 'button', class: 'result', 'data-id': animal.id },
      photo(animal, 'result-photo'),
      element('span', { class: 'result-name' }, animal.name),
      about ? element('span', { class: 'result-about' }, about) : null,
      // proto3's JSON leaves false out: no `available` means the zoo does not keep it now.
      animal.available ? null : element('span', { class: 'badge' }, 'not kept now'));
    button.addEventListener('click', () => showAnimal(animal.id));
    return element('li', {}, button);
  }

  /// An animal's photo, loaded only when scrolled near (a list of hundreds must not fetch them all), with the
  /// source's alt text or else the animal's name. A photo that fails to load leaves its frame empty, not a
  /// broken-image icon. Null when the animal has none.
  function photo(animal, className) {
    if (!animal.imageUrl) return null;
    const image = element('img', { class: className, src: animal.imageUrl, alt: animal.imageAlt || animal.name, loading: 'lazy',
      decoding: 'async' });
    image.addEventListener('error', () => image.classList.add('missing'), { once: true });
    return image;
  }

  // ---- detail ----------------------------------------------------------------------------------------

  async function showAnimal(id) {
    const status = $('search-status');
    let animal;
    try {
      ({ animal } = await call('GetAnimal', { id: String(id), includeUnavailable: true }));
    } catch (error) {
      status.textContent = error.message;
      return;
    }
    state.animal = animal;
    clearRoute();
    renderDetail(animal);
    highlightAnimal(animal);
    const detail = $('detail');
    detail.hidden = false;
    $('detail-name').focus({ preventScroll: true });
    detail.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
  }

  function renderDetail(animal) {
    const figure = photo(animal, 'detail-photo');
    $('detail-figure').replaceChildren(...(figure ? [figure] : []));
    $('detail-figure').hidden = !figure;
    $('detail-name').textContent = animal.name;
    $('detail-names').textContent = [animal.latinName, animal.englishName].filter(Boolean).join(' · ');

    const taxon = (t) => t?.czech ? (t.latin ? `${t.czech} (${t.latin})` : t.czech) : null;
    const facts = [
      ['Class', taxon(animal.taxonClass)],
      ['Order', taxon(animal.order)],
      ['Continents', (animal.continents ?? []).join(', ')],
      ['Range', animal.range],
      ['Biotope', [(animal.biotopes ?? []).join(', '), animal.biotopeDetail].filter(Boolean).join(' — ')],
      ['Food', [(animal.foods ?? []).join(', '), animal.foodDetail].filter(Boolean).join(' — ')],
      ['Size', animal.proportions],
      ['Where in the zoo', animal.location],
      ['Adoption', animal.adoption?.priceCzk ? `${animal.adoption.priceCzk} CZK a year` : null],
    ];
    $('detail-facts').replaceChildren(...facts.filter(([, value]) => value).flatMap(([name, value]) =>
      [element('dt', {}, name), element('dd', {}, value)]));

    const texts = [
      [null, animal.description],
      ['Reproduction', animal.reproduction],
      ['Did you know?', animal.interestingFacts],
      ['In the Prague Zoo', animal.breeding],
      ['Conservation', animal.projects],
    ];
    $('detail-text').replaceChildren(...texts.filter(([, text]) => text).flatMap(([heading, text]) =>
      [heading ? element('h3', {}, heading) : null, element('p', {}, text)].filter(Boolean)));

    const links = [];
    if (animal.imageUrl) {
      links.push(element('a', { href: animal.imageUrl, target: '_blank', rel: 'noopener', title: animal.imageAlt }, 'Photo'));
    }
    if (animal.locationUrl) {
      links.push(element('a', { href: animal.locationUrl, target: '_blank', rel: 'noopener' }, animal.location || 'Its house'));
    }
    $('detail-links').replaceChildren(...links.flatMap((link, index) => (index ? [' · ', link] : [link])));

    const places = {
      // A walk goes to whichever of its own places is nearest on foot.
      PLACE_KIND_PEN: () => `On the map at: ${(animal.mapLocations ?? []).map((l) => l.name).filter(Boolean).join(', ') || animal.placeName}.`,
      PLACE_KIND_HOUSE: () => `On the map at its house: ${animal.placeName}.`,
      PLACE_KIND_ZOO_PART: () => `On the map at its part of the zoo: ${animal.placeName}.`,
    };
    const routable = Boolean(places[animal.placeKind]);
    $('detail-place').textContent = routable
      ? places[animal.placeKind]()
      : `Not on the map${animal.unroutableReason ? `: ${animal.unroutableReason}` : '.'}`;
    $('route-animal-button').disabled = !routable;
    // A separate walk to the house only makes sense when the animal has its own enclosure elsewhere.
    $('route-house-button').hidden = !(animal.location && animal.placeKind === 'PLACE_KIND_PEN');
  }

  // ---- map -------------------------------------------------------------------------------------------

  /// An equirectangular projection of the zoo (a few hundred metres across, so flat is exact enough):
  /// map units are metres east and south of the north-west corner.
  function makeProjection(points) {
    let west = Infinity, east = -Infinity, south = Infinity, north = -Infinity;
    for (const [lon, lat] of points) {
      west = Math.min(west, lon); east = Math.max(east, lon);
      south = Math.min(south, lat); north = Math.max(north, lat);
    }
    const metresPerDegree = 111320;
    const xScale = metresPerDegree * Math.cos(((north + south) / 2) * Math.PI / 180);
    const width = Math.max((east - west) * xScale, 1);
    const height = Math.max((north - south) * metresPerDegree, 1);
    const pad = Math.max(width, height) * 0.06;
    return {
      width, height, pad,
      unit: Math.max(width, height) / 200,   // a marker's radius
      project: (lon, lat) => ({ x: (lon - west) * xScale, y: (north - lat) * metresPerDegree }),
      unproject: (x, y) => ({ lon: west + x / xScale, lat: north - y / metresPerDegree }),
    };
  }

  function pathData(points, projection) {
    return points.map(([lon, lat], index) => {
      const { x, y } = projection.project(lon, lat);
      return `${index ? 'L' : 'M'}${x.toFixed(1)} ${y.toFixed(1)}`;
    }).join(' ');
  }

  async function loadMap() {
    const { geojson } = await call('ExportGeoJSON', {}, { get: true });
    const features = JSON.parse(geojson || '{"features":[]}').features ?? [];
    const lines = features.filter((f) => f.geometry?.type === 'LineString');
    const points = features.filter((f) => f.geometry?.type === 'Point');
    const all = lines.flatMap((f) => f.geometry.coordinates).concat(points.map((f) => f.geometry.coordinates));
    if (all.length === 0) throw new ServiceError('failed_precondition', 'The zoo has no footpaths loaded.');
    // The zoo is where its animals are: the real footpath graph runs on into the streets around it, which
    // would shrink the zoo to a corner, so the view fits the animals' locations (and clips the rest).
    const projection = makeProjection(points.length >= 2 ? points.map((f) => f.geometry.coordinates) : all);
    state.projection = projection;

    const svg = $('map');
    const { width, height, pad } = projection;
    svg.style.aspectRatio = `${(width + 2 * pad).toFixed(1)} / ${(height + 2 * pad).toFixed(1)}`;
    svg.setAttribute('viewBox', `${(-pad).toFixed(1)} ${(-pad).toFixed(1)} ${(width + 2 * pad).toFixed(1)} ${(height + 2 * pad).toFixed(1)}`);
    $('footpaths').replaceChildren(...lines.map((f) =>
      element('svg:path', { d: pathData(f.geometry.coordinates, projection), 'data-road': f.properties?.road_id })));
    $('locations').replaceChildren(...points.map((f) => {
      const { x, y } = projection.project(...f.geometry.coordinates);
      return element('svg:circle', { cx: x.toFixed(1), cy: y.toFixed(1), r: projection.unit.toFixed(2) },
        element('svg:title', {}, f.properties?.name ?? ''));
    }));
    state.cursor = { x: width / 2, y: height / 2 };
    await labelLocations(points, projection);
    document.body.dataset.map = 'ready';
  }

  /// Names the map's places: pavilions and parts of the zoo (the zoo-house filter's values) in bold, first, then
  /// the pens. A label that would overlap one already placed tries the other side of its point, then is left
  /// out (its point keeps a tooltip): the real map has ninety places, and overlapping names help no one.
  async function labelLocations(points, projection) {
    const { zooHouses = [] } = await call('ListFilterValues', { includeUnavailable: true }, { get: true })
      .catch(() => ({}));   // without the list every place is labelled as a pen, which is still a map
    const houses = new Set(zooHouses.map(({ value }) => value));
    const named = points.filter((f) => f.properties?.name)
      .map((f) => ({ name: f.properties.name, kind: houses.has(f.properties.name) ? 'house' : 'pen', at: projection.project(...f.geometry.coordinates) }))
      .sort((a, b) => (a.kind === b.kind ? 0 : a.kind === 'house' ? -1 : 1));
    const group = $('labels');
    group.replaceChildren();
    group.style.fontSize = `${(projection.unit * (matchMedia('(max-width: 600px)').matches ? 5.5 : 4)).toFixed(2)}px`;
    const placed = [];
    const overlaps = (a) => placed.some((b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height);
    for (const { name, kind, at } of named) {
      const label = element('svg:text', { class: kind, 'data-kind': kind }, name);
      group.append(label);
      const gap = projection.unit * 2.4;   // clear of a highlighted place's ring (radius 2)
      for (const [anchor, dx] of [['start', gap], ['end', -gap]]) {
        label.setAttribute('text-anchor', anchor);
        label.setAttribute('x', (at.x + dx).toFixed(1));
        label.setAttribute('y', (at.y + projection.unit).toFixed(1));
        const box = label.getBBox();
        if (!overlaps(box)) { placed.push(box); break; }
        if (anchor === 'end') label.remove();
      }
    }
  }

  function placeCircle(id, point, radius) {
    const { x, y } = state.projection.project(point.lon, point.lat);
    const circle = $(id);
    circle.setAttribute('cx', x.toFixed(1));
    circle.setAttribute('cy', y.toFixed(1));
    circle.setAttribute('r', radius.toFixed(2));
  }

  function highlightAnimal(animal) {
    if (!state.projection) return;
    const anchors = (animal.mapLocations ?? []).map((location) => location.anchor).filter(Boolean);
    $('highlights').replaceChildren(...anchors.map((anchor) => {
      const { x, y } = state.projection.project(anchor.lon ?? 0, anchor.lat ?? 0);
      return element('svg:circle', { cx: x.toFixed(1), cy: y.toFixed(1), r: (state.projection.unit * 2).toFixed(2) });
    }));
  }

  /// The map point under a click or tap, through the SVG's own transform (so it holds at any size).
  function eventPoint(event) {
    const svg = $('map');
    const point = svg.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    return point.matrixTransform(svg.getScreenCTM().inverse());
  }

  function setStart(point, how) {
    state.start = point;
    placeCircle('start-marker', point, state.projection.unit * 1.6);
    const marker = $('start-marker');
    marker.dataset.lat = String(point.lat);
    marker.dataset.lon = String(point.lon);
    $('start-text').textContent = `Start (${how}): ${formatPoint(point)}`;
    $('map-status').textContent = '';
    if (state.target) route(state.target);
  }

  function onMapClick(event) {
    if (!state.projection) return;
    const { x, y } = eventPoint(event);
    state.cursor = { x, y };
    const point = state.projection.unproject(x, y);
    placeCircle('cursor', point, state.projection.unit);   // the keyboard goes on from here
    setStart(point, 'on the map');
  }

  function onMapKey(event) {
    if (!state.projection) return;
    const step = (event.shiftKey ? 10 : 2) * state.projection.unit;
    const moves = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] };
    if (moves[event.key]) {
      event.preventDefault();
      const [dx, dy] = moves[event.key];
      state.cursor = { x: state.cursor.x + dx, y: state.cursor.y + dy };
      placeCircle('cursor', state.projection.unproject(state.cursor.x, state.cursor.y), state.projection.unit);
    } else if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      setStart(state.projection.unproject(state.cursor.x, state.cursor.y), 'chosen with the keyboard');
    }
  }

  function locate() {
    if (!navigator.geolocation) {
      $('map-status').textContent = 'This browser cannot tell where you are; click the map instead.';
      return;
    }
    $('map-status').textContent = 'Finding where you are…';
    navigator.geolocation.getCurrentPosition(
      (position) => setStart({ lat: position.coords.latitude, lon: position.coords.longitude }, 'your location'),
      (error) => { $('map-status').textContent = `Your location is not available (${error.message}); click the map instead.`; },
      { enableHighAccuracy: true, timeout: 15000 });
  }

  // ---- walks -----------------------------------------------------------------------------------------

  /// Forgets the walk shown: a new animal's detail must not sit beside the last one's walk.
  function clearRoute() {
    state.target = null;
    $('route-path').setAttribute('d', '');
    for (const id of ['route-length', 'route-time', 'route-destination', 'map-status']) $(id).textContent = '';
  }

  async function route(target) {
    state.target = target;
    const status = $('map-status');
    if (!state.start) {
      status.textContent = 'Set where you are first: click the map or use your location.';
      $('map').focus();
      return;
    }
    document.body.dataset.route = 'loading';
    status.textContent = '';
    try {
      const response = await call('Route', { from: { point: state.start }, to: target });
      const walk = response.route ?? {};
      const coordinates = (walk.coordinates ?? []).map((p) => [p.lon ?? 0, p.lat ?? 0]);
      $('route-path').setAttribute('d', pathData(coordinates, state.projection));
      $('route-length').textContent = formatLength(walk.distanceM ?? 0);
      $('route-time').textContent = `· ${formatWalk(walk.durationS ?? 0)}`;
      const destination = response.destination ?? {};
      const kind = PLACE_KINDS[destination.kind];
      $('route-destination').textContent = destination.name ? `to ${destination.name}` : (kind ? `to ${kind}` : '');
      // On a phone the map is below the detail: bring the walk into view (nothing moves when it already is).
      $('map-section').scrollIntoView({ block: 'nearest', behavior: 'smooth' });
    } catch (error) {
      clearRoute();
      state.target = target;
      status.textContent = error.code === 'out_of_range'
        ? `${error.message}: set a start inside the zoo.`
        : error.message;
    }
    document.body.dataset.route = 'done';
  }

  // ---- wiring ----------------------------------------------------------------------------------------

  function start() {
    try {
      apiBase();
    } catch (error) {
      $('search-status').textContent = error.message;
      return;
    }
    $('search-form').addEventListener('submit', (event) => { event.preventDefault(); search(); });
    // One listener for every checkbox, including those loadFilters adds later.
    $('filters').addEventListener('change', (event) => {
      if (event.target.id !== 'include-unavailable') search();
    });
    // The values offered change with it: search once they are loaded, with the ticks still valid.
    $('include-unavailable').addEventListener('change', () => {
      loadFilters().catch((error) => { $('search-status').textContent = error.message; }).finally(() => search());
    });
    $('more-button').addEventListener('click', () => search({ more: true }));
    $('route-animal-button').addEventListener('click', () => state.animal && route({ animalId: String(state.animal.id) }));
    $('route-house-button').addEventListener('click', () => state.animal?.location && route({ zooHouse: state.animal.location }));
    $('locate-button').addEventListener('click', locate);
    $('map').addEventListener('click', onMapClick);
    $('map').addEventListener('keydown', onMapKey);
    $('map').addEventListener('focus', () => {
      if (state.projection) placeCircle('cursor', state.projection.unproject(state.cursor.x, state.cursor.y), state.projection.unit);
    });

    loadFilters().catch((error) => { $('search-status').textContent = error.message; });
    loadMap().catch((error) => { $('map-status').textContent = error.message; document.body.dataset.map = 'failed'; });
    search();
  }

  start();
})();
