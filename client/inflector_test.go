package client

import "testing"

func TestPluralize(t *testing.T) {
	cases := map[string]string{
		// regular
		"User": "Users", "Order": "Orders", "OrderLine": "OrderLines", "Employee": "Employees",
		"Day": "Days", "Key": "Keys", "Boy": "Boys",
		// -y → -ies after a consonant
		"Company": "Companies", "City": "Cities", "Category": "Categories", "SupplierCompany": "SupplierCompanies",
		"Soliloquy": "Soliloquies",
		// -s, -x, -z, -ch, -sh → -es
		"Bus": "Buses", "Class": "Classes", "Address": "Addresses", "Status": "Statuses", "Box": "Boxes",
		"Match": "Matches", "Dish": "Dishes", "Waltz": "Waltzes", "Buzz": "Buzzes", "TaxBox": "TaxBoxes",
		// -sis, -f
		"Analysis": "Analyses", "Half": "Halves", "Wolf": "Wolves", "Knife": "Knives", "Chief": "Chiefs", "Safe": "Safes",
		// irregular, also as the last word of a CamelCase name
		"Person": "People", "SalesPerson": "SalesPeople", "Man": "Men", "Woman": "Women", "Child": "Children",
		"Mouse": "Mice", "Ox": "Oxen", "Index": "Indices", "Matrix": "Matrices", "Hero": "Heroes", "Photo": "Photos",
		"Datum": "Data", "Quiz": "Quizzes", "Human": "Humans",
		// uncountable
		"Equipment": "Equipment", "Information": "Information", "Money": "Money", "Species": "Species",
		"Series": "Series", "Fish": "Fish", "Sheep": "Sheep", "OfficeEquipment": "OfficeEquipment",
		"TvSeries": "TvSeries",
		// case is kept
		"company": "companies", "person": "people", "COMPANY": "COMPANIES", "PERSON": "PEOPLE", "URL": "URLs",
		"HTTPServer": "HTTPServers", "snake_case_entry": "snake_case_entries",
		"": "",
	}
	for in, want := range cases {
		if got := Pluralize(in); got != want {
			t.Errorf("Pluralize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIDPrefix(t *testing.T) {
	cases := map[string]string{
		"Companies": "companies", "Users": "users", "OrderLines": "OrderLines", "People": "people",
		"companies": "companies", "URLs": "URLs", "": "", "Équipes": "équipes",
	}
	for in, want := range cases {
		if got := DefaultTransformCollectionNameToDocumentIDPrefix(in); got != want {
			t.Errorf("prefix(%q) = %q, want %q", in, got, want)
		}
	}
}
