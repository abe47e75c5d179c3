// The hash routes of the pages that list items and open one: `#/PAGE/KEY`.

/** The decoded rest of the route after `#/PAGE/` ("" on the page's list). */
export function subRoute(page) {
  const rest = location.hash.replace(new RegExp(`^#/?${page}/?`), "");
  try {
    return decodeURIComponent(rest);
  } catch {
    return rest;
  }
}

/** Go to a route; the same route renders again (fresh data after a save). */
export function go(route) {
  const target = `#/${route}`;
  if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = target;
}
