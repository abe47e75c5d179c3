"""About fifty tools of everyday services — travel, mail, calendars, files, shops, code, the
home — that the benchmark's questions do not need: offered beside a set's tools, they make a
question one of sixty tools. Some share words with the questions on purpose (a city, a time,
a price, a text), as real catalogues do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bench.choice.sets import ToolSpec, arg


def _done(name: str) -> Any:
    def answer(a: Mapping[str, Any]) -> tuple[str, str]:
        return f"{name}: done ({', '.join(f'{k}={v}' for k, v in a.items())}).", "done"
    return answer


S, N, I = "string", "number", "integer"

_SPECS: list[tuple[str, str, list[dict[str, Any]]]] = [
    ("flight-status", "Show the status of a flight by its number",
     [arg("flight", S, "The flight number, e.g. BA117")]),
    ("search-flights", "Search flights between two airports on a date",
     [arg("origin", S, "Airport code to fly from"), arg("destination", S, "Airport code to fly to"),
      arg("date", S, "Departure date", format="date")]),
    ("book-hotel", "Book a hotel room in a city",
     [arg("city", S, "Where to stay"), arg("nights", I, "How many nights", minimum=1)]),
    ("car-rental", "Find rental cars at an airport",
     [arg("airport", S, "The airport code"), arg("days", I, "Rental days", minimum=1)]),
    ("train-times", "List train departures from a station",
     [arg("station", S, "The station's name")]),
    ("send-email", "Send an email",
     [arg("to", S, "The recipient's address"), arg("subject", S, "The subject line"),
      arg("body", S, "The message")]),
    ("search-email", "Search the mailbox",
     [arg("query", S, "Words to look for")]),
    ("create-event", "Add an event to the calendar",
     [arg("title", S, "The event's title"), arg("start", S, "When it starts", format="date-time")]),
    ("list-events", "List the calendar's events on a day",
     [arg("day", S, "The day", format="date")]),
    ("cancel-meeting", "Cancel a meeting in the calendar",
     [arg("meeting_id", S, "The meeting's id")]),
    ("read-file", "Read a file from the shared drive",
     [arg("path", S, "The file's path")]),
    ("write-file", "Write text to a file on the shared drive",
     [arg("path", S, "The file's path"), arg("content", S, "What to write")]),
    ("search-files", "Find files on the shared drive by name",
     [arg("pattern", S, "Part of the file name")]),
    ("order-groceries", "Order groceries for delivery",
     [arg("items", "array", "What to order", items={"type": "string"})]),
    ("track-parcel", "Track a parcel by its tracking number",
     [arg("tracking_number", S, "The parcel's tracking number")]),
    ("product-price", "Look up the price of a product in the shop",
     [arg("product", S, "The product's name")]),
    ("add-to-cart", "Add a product to the shopping cart",
     [arg("product", S, "The product's name"), arg("quantity", I, "How many", minimum=1)]),
    ("create-issue", "Open an issue in the bug tracker",
     [arg("title", S, "The issue's title"), arg("body", S, "What is wrong")]),
    ("list-pull-requests", "List open pull requests of a repository",
     [arg("repository", S, "owner/name of the repository")]),
    ("run-sql", "Run a read-only SQL query on the reporting database",
     [arg("query", S, "The SQL query")]),
    ("restart-service", "Restart a service on a server",
     [arg("service", S, "The service's name"), arg("host", S, "The server")]),
    ("server-metrics", "Show CPU and memory of a server",
     [arg("host", S, "The server's name")]),
    ("turn-on-lights", "Turn on the lights in a room",
     [arg("room", S, "The room, e.g. kitchen")]),
    ("set-thermostat", "Set the heating to a temperature",
     [arg("degrees", N, "The temperature in degrees")]),
    ("lock-door", "Lock a door of the house",
     [arg("door", S, "Which door", enum=["front", "back", "garage"])]),
    ("play-music", "Play music by an artist or of a genre",
     [arg("query", S, "An artist, album or genre")]),
    ("podcast-search", "Find podcast episodes about a subject",
     [arg("subject", S, "What the episodes are about")]),
    ("news-headlines", "Latest news headlines on a subject",
     [arg("subject", S, "The subject"), arg("count", I, "How many", required=False)]),
    ("find-recipe", "Find recipes with an ingredient",
     [arg("ingredient", S, "The main ingredient")]),
    ("nutrition-facts", "Calories and nutrients of a food",
     [arg("food", S, "The food")]),
    ("log-workout", "Record a workout in the fitness log",
     [arg("activity", S, "What was done"), arg("minutes", I, "How long")]),
    ("step-count", "How many steps were walked on a day",
     [arg("day", S, "The day", format="date")]),
    ("bank-balance", "Show the balance of a bank account",
     [arg("account_id", S, "The account's id")]),
    ("pay-invoice", "Pay an invoice from the business account",
     [arg("invoice_id", S, "The invoice's id"), arg("amount", N, "The amount")]),
    ("expense-report", "Create an expense report",
     [arg("amount", N, "How much was spent"), arg("category", S, "What it was for")]),
    ("stock-news", "News about a listed company",
     [arg("company", S, "The company's name")]),
    ("crm-contact", "Look up a customer in the CRM",
     [arg("name", S, "The customer's name")]),
    ("create-ticket", "Open a support ticket for a customer",
     [arg("customer", S, "The customer"), arg("problem", S, "What went wrong")]),
    ("survey-results", "Summarise the answers of a survey",
     [arg("survey_id", S, "The survey's id")]),
    ("employee-directory", "Find a colleague's phone number and office",
     [arg("name", S, "The colleague's name")]),
    ("book-meeting-room", "Reserve a meeting room",
     [arg("room", S, "The room's name"), arg("hour", I, "The hour, 0 to 23")]),
    ("vacation-days", "How many vacation days an employee has left",
     [arg("employee", S, "The employee's name")]),
    ("parking-spots", "Free parking spots near an address",
     [arg("address", S, "The address")]),
    ("public-holidays", "Public holidays of a country in a year",
     [arg("country", S, "The country"), arg("year", I, "The year")]),
    ("air-quality", "Air quality index of a city",
     [arg("city", S, "The city")]),
    ("tide-times", "High and low tide times at a beach",
     [arg("beach", S, "The beach")]),
    ("sunrise-sunset", "Sunrise and sunset times for a city",
     [arg("city", S, "The city")]),
    ("movie-showtimes", "Cinema showtimes for a film",
     [arg("film", S, "The film's title"), arg("city", S, "The city")]),
    ("book-search", "Search the library catalogue for a book",
     [arg("title", S, "The book's title or author")]),
    ("qr-code", "Make a QR code for a link",
     [arg("url", S, "The link")]),
    ("shorten-url", "Make a short link",
     [arg("url", S, "The link to shorten")]),
    ("password-generator", "Generate a random password",
     [arg("length", I, "How many characters", minimum=8)]),
]

DISTRACTORS = [ToolSpec(name, description, arguments, _done(name))
               for name, description, arguments in _SPECS]
